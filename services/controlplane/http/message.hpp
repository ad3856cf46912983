// HTTP room: the request/response values the API layer sees. No Beast here, so API handlers and
// their tests do not compile the HTTP machinery.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

namespace mooring::controlplane::http {

// Query parameters after percent-decoding. A repeated key keeps its last value, which is what
// Nomad's API does for the parameters we support.
using QueryParams = std::map<std::string, std::string, std::less<>>;

// Values of `:name` segments of the matched route pattern, percent-decoded.
using PathParams = std::map<std::string, std::string, std::less<>>;

struct Request {
  std::string method;  // upper case, e.g. "GET"
  std::string target;  // raw request-target, e.g. "/v1/volumes?prefix=a"
  std::string path;    // target without the query, still percent-encoded
  QueryParams query;
  std::map<std::string, std::string, std::less<>> headers;  // names lower-cased
  std::string body;
  PathParams params;   // filled in by the router
  std::string remote;  // the client's "address:port", for the audit log
  // HTTPS: the client presented a certificate from our CA with the control plane identity (a
  // standby forwarding; http::TlsFiles::peer_ca_file).
  bool peer_control_plane = false;
  bool secure = false;  // it arrived over HTTPS (a same-origin Origin must say https)
  // A request a standby forwarded: that standby (its advertised URL); `remote` is then the
  // client it forwarded for (ha/front.cpp).
  std::string via;

  // Header value by lower-case name, or empty.
  std::string_view header(std::string_view lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string_view{} : std::string_view{it->second};
  }
  // Query value or nullopt.
  std::optional<std::string_view> param(std::string_view name) const {
    auto it = query.find(name);
    if (it == query.end()) return std::nullopt;
    return std::string_view{it->second};
  }
};

struct Response {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // Index of the data the response reflects; sent as X-Mooring-Index and X-Nomad-Index.
  std::optional<std::uint64_t> index;
  // Close the connection after this response (set by the server for errors it cannot recover from).
  bool close = false;
  // A streamed body (the event stream): the status and headers go out at once, then every piece
  // next() returns is written as it comes (a chunk, HTTP/1.1 chunked encoding) until it returns
  // nullopt; then the connection closes. The server cancels a pending next() when the client
  // goes away (its socket turns readable: closed, or it sent something) or on shutdown, and
  // ends the body cleanly. `body` is ignored when this is set.
  using NextPiece = std::function<boost::asio::awaitable<std::optional<std::string>>()>;
  NextPiece stream;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// A JSON error body {"Error":"..."} with the given status.
Response error_response(unsigned status, std::string_view message);

// A JSON body with status 200 (or the given status).
Response json_response(std::string body, unsigned status = 200);

// The answer for a handler that threw `error`: 503 "shutting down" when a forced shutdown
// cancelled it, else 500 "internal error", logged with the method and path (never the query).
Response answer_exception(std::exception_ptr error, const Request& request);

}  // namespace mooring::controlplane::http
