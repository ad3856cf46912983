// CLI room: a small synchronous HTTP/1.1 client for the control plane's REST API (one request
// per connection, a deadline on the whole exchange). Beast stays inside http_client.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::cli {

// Where the address came from: a connection error says what to change.
enum class AddressOrigin { fallback, environment, flag };  // the default, MOORING_ADDR, -address

struct Endpoint {
  std::string host;
  std::string port;
  std::string url;  // normalised, for messages: "https://127.0.0.1:4700"
  bool tls = false;
  AddressOrigin origin = AddressOrigin::fallback;
};

// "https://HOST:PORT", "http://HOST:PORT", "HOST:PORT" (http), "https://HOST" (port 443),
// "[::1]:4700"; a trailing "/" is ignored. Other schemes and paths are refused saying why.
domain::Expected<Endpoint> parse_address(std::string_view text);

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // A streamed body (GET /v1/event/stream): when set, a 2xx body goes to this piece by piece as
  // it arrives (return false to stop reading) instead of into HttpResponse::body, and `timeout`
  // bounds the connect, the headers and each wait for more bytes, not the whole body.
  std::function<bool(std::string_view)> on_body;
};

struct HttpResponse {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string{} : it->second;
  }
};

// HTTPS: the server's certificate is checked against `ca_file` (the system's CAs when empty)
// and must name the host dialled; a client certificate is sent when given.
struct TlsClientFiles {
  std::string ca_file;    // MOORING_CACERT / -ca-cert
  std::string cert_file;  // MOORING_CLIENT_CERT / -client-cert
  std::string key_file;   // MOORING_CLIENT_KEY / -client-key
};

class HttpClient {
 public:
  explicit HttpClient(Endpoint endpoint, TlsClientFiles tls = {})
      : endpoint_(std::move(endpoint)), tls_(std::move(tls)) {}
  const Endpoint& endpoint() const { return endpoint_; }

  // Any HTTP status is a response. The error (connection refused, timeout, a broken reply) is a
  // sentence naming the address, ready to print. A write gets an Idempotency-Key (unless it has
  // one); a request that got no answer, or 503, is sent again (4 tries in about 2 s) with the
  // same key, so the control plane acts on it once. A refused certificate is not retried.
  domain::Expected<HttpResponse> send(const HttpRequest& request) const;
  // One try, nothing sent again: for a streamed body, which a retry would deliver twice.
  domain::Expected<HttpResponse> send_once(const HttpRequest& request) const {
    bool permanent = false;
    return send_once(request, permanent);
  }

 private:
  // `permanent`: the failure will not go away by sending again (HTTPS set-up or certificate).
  domain::Expected<HttpResponse> send_once(const HttpRequest& request, bool& permanent) const;
  Endpoint endpoint_;
  TlsClientFiles tls_;
};

// Percent-encodes a path segment or query value (ids may hold characters like '/').
std::string url_encode(std::string_view text);

}  // namespace mooring::cli
