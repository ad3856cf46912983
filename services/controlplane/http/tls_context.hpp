// HTTP room: the TLS settings of the REST API's listener. Only tls_context.cpp and server.cpp see
// OpenSSL and Asio SSL; everything else passes file names.
#pragma once

#include <memory>
#include <string>

#include "shared/domain/result.hpp"

namespace boost::asio::ssl {
class context;
}

namespace mooring::controlplane::http {

struct TlsFiles {
  std::string cert_file;       // PEM: the server's certificate (then its chain); empty: plain HTTP
  std::string key_file;        // PEM: its private key
  std::string client_ca_file;  // PEM: when set, every client must present a certificate it signed

  bool enabled() const { return !cert_file.empty(); }
};

// A server context: TLS 1.2 or newer, the certificate and key checked against each other, client
// certificates required when a client CA is given. The error names the file and the reason.
domain::Expected<std::shared_ptr<boost::asio::ssl::context>> make_server_tls(const TlsFiles& files);

}  // namespace mooring::controlplane::http
