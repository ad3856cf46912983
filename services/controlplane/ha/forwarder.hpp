// HA room: a standby's REST forwarding. Each request a standby cannot answer itself is sent to the
// leader's advertised HTTP address as it came (method, target, headers with the ACL token, body)
// and the leader's answer goes back unchanged: the client sees the leader's status, body and
// index. One connection per request (a standby forwards little; the CLI and dashboards find the
// leader through X-Mooring-Leader). Beast and OpenSSL stay in forwarder.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/http/message.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::ha {

struct ForwardTls {
  std::string ca_file;  // the CA that signed the leader's certificate (needed for https://)
  // Sent when the leader asks for a client certificate (--http-client-ca-file).
  std::string cert_file, key_file;
};

class Forwarder {
 public:
  // Reads the TLS files now; an error names the file.
  static domain::Expected<std::unique_ptr<Forwarder>> make(boost::asio::any_io_executor executor, ForwardTls tls);
  ~Forwarder();

  // `leader_url`: "http(s)://host:port". A leader that cannot be reached or does not answer
  // gives 503 naming it (Retry-After: 1), so clients retry as they do on any 503.
  boost::asio::awaitable<http::Response> forward(std::string leader_url, http::Request request);

 private:
  struct Impl;
  explicit Forwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::ha
