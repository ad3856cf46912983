// HTTP room: the TLS settings of the REST API's listener. Only tls_context.cpp and the server
// (server.cpp, session.cpp) see OpenSSL and Asio SSL; everything else passes file names.
#pragma once

#include <memory>
#include <string>

#include "shared/domain/result.hpp"

namespace boost::asio::ssl {
class context;
}
struct x509_st;  // OpenSSL's X509

namespace mooring::controlplane::http {

struct TlsFiles {
  std::string cert_file;       // PEM: the server's certificate (then its chain); empty: plain HTTP
  std::string key_file;        // PEM: its private key
  std::string client_ca_file;  // PEM: when set, every client must present a certificate it signed
  // PEM: the CA of the other control planes (HA): clients are asked for a certificate but need
  // not send one; one from this CA with the control plane identity marks the connection as a
  // peer's (Request::peer_control_plane), whose forwarding headers the leader believes.
  std::string peer_ca_file;

  bool enabled() const { return !cert_file.empty(); }
};

// A server context: TLS 1.2 or newer, the certificate and key checked against each other, client
// certificates required when a client CA is given. The error names the file and the reason.
domain::Expected<std::shared_ptr<boost::asio::ssl::context>> make_server_tls(const TlsFiles& files);

// The certificate carries the control plane's identity (spiffe://mooring/server). Whether it
// chains to our CA is the TLS handshake's business.
bool is_control_plane(x509_st* cert);

}  // namespace mooring::controlplane::http
