// HA room: a standby's REST forwarding. Each request a standby cannot answer itself is sent to the
// leader's advertised HTTP address as it came (method, target, headers with the ACL token, body)
// and the leader's answer goes back unchanged: the client sees the leader's status, body and
// index. One connection per request (a standby forwards little; the CLI and dashboards find the
// leader through X-Mooring-Leader). Beast and OpenSSL stay in forwarder.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/http/message.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::ha {

// A forwarded request carries its caller as the standby saw it. The leader believes these only
// from a peer that presented a control plane certificate (front.cpp); a standby drops any a
// client sent itself.
inline constexpr std::string_view kForwardedPrefix = "x-mooring-forwarded-";
inline constexpr std::string_view kForwardedFor = "x-mooring-forwarded-for";  // the client's "address:port"
inline constexpr std::string_view kForwardedBy = "x-mooring-forwarded-by";    // the standby's advertised URL

struct ForwardTls {
  std::string ca_file;  // the CA that signed the leader's certificate (needed for https://)
  // Sent when the leader asks for a client certificate (--http-client-ca-file).
  std::string cert_file, key_file;
};

// How long a forward may take. A leader that is paused or cut off keeps its TCP port open (the
// kernel accepts) but answers nothing, and its lease ends within one lease: past `answer` a
// standby has been elected, so waiting longer only holds the client.
struct ForwardTimeouts {
  std::chrono::milliseconds connect{std::chrono::seconds(1)};  // name resolution and TCP connect
  // TLS handshake and the whole answer (main: 2 x --leader-lease). A blocking query gets its
  // `wait` (default 5 min, at most 10) on top.
  std::chrono::milliseconds answer{std::chrono::seconds(4)};
};

struct Forwarded {
  http::Response response;
  bool answered = false;  // the leader's own answer (any status); false: our 503 naming it
};

class Forwarder {
 public:
  // Reads the TLS files now; an error names the file.
  static domain::Expected<std::unique_ptr<Forwarder>> make(boost::asio::any_io_executor executor, ForwardTls tls,
                                                           ForwardTimeouts timeouts = {});
  ~Forwarder();

  // `leader_url`: "http(s)://host:port". A leader that cannot be reached or does not answer in
  // time gives 503 naming it (Retry-After: 1), so clients retry as they do on any 503.
  // `via`: this control plane's advertised address, sent with the caller's address so the
  // leader's audit log names the real client (it trusts them only from a control plane's
  // certificate: front.hpp).
  boost::asio::awaitable<Forwarded> forward(std::string leader_url, http::Request request, std::string via = {});

 private:
  struct Impl;
  explicit Forwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::ha
