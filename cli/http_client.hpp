// CLI room: a small synchronous HTTP/1.1 client for the control plane's REST API (one request
// per connection, a deadline on the whole exchange). Beast stays inside http_client.cpp.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::cli {

struct Endpoint {
  std::string host;
  std::string port;
  std::string url;  // normalised, for messages: "http://127.0.0.1:4700"
};

// "http://HOST:PORT", "HOST:PORT", "http://HOST" (port 80), "[::1]:4700"; a trailing "/" is
// ignored. https and paths are refused with a message saying why.
domain::Expected<Endpoint> parse_address(std::string_view text);

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
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

class HttpClient {
 public:
  explicit HttpClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}
  const Endpoint& endpoint() const { return endpoint_; }

  // Any HTTP status is a response. The error (connection refused, timeout, a broken reply) is a
  // sentence naming the address, ready to print. A write gets an Idempotency-Key (unless it has
  // one); a request that got no answer, or 503, is sent again (4 tries in about 2 s) with the
  // same key, so the control plane acts on it once.
  domain::Expected<HttpResponse> send(const HttpRequest& request) const;

 private:
  domain::Expected<HttpResponse> send_once(const HttpRequest& request) const;
  Endpoint endpoint_;
};

// Percent-encodes a path segment or query value (ids may hold characters like '/').
std::string url_encode(std::string_view text);

}  // namespace mooring::cli
