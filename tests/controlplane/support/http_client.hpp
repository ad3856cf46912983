// Test support: a blocking HTTP/1.1 client over a real socket, one connection per request unless
// a Connection is kept. Beast stays in the .cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace mooring::controlplane {

struct HttpResult {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;  // set when the exchange failed at the socket level

  std::string header(const std::string& lower) const {
    auto it = headers.find(lower);
    return it == headers.end() ? std::string{} : it->second;
  }
};

// One request on a fresh connection to 127.0.0.1:port.
HttpResult http_request(std::uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body = {}, const std::map<std::string, std::string>& headers = {});

// A kept-alive connection for several requests.
class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port);
  ~HttpConnection();
  HttpResult request(const std::string& method, const std::string& target, const std::string& body = {},
                     const std::map<std::string, std::string>& headers = {});
  // Writes raw bytes and reads one response (or the error when the server closes).
  HttpResult raw(const std::string& bytes);
  bool open() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A streamed response read line by line (GET /v1/event/stream): the headers on construction,
// then the body's lines as they come, chunked encoding undone.
class HttpLineStream {
 public:
  HttpLineStream(std::uint16_t port, const std::string& target, const std::map<std::string, std::string>& headers = {});
  ~HttpLineStream();
  unsigned status() const;                                 // 0 when the connection failed
  std::string header(const std::string& lower) const;
  // The next line without its newline; nullopt when `timeout` passed first (`ended()` false) or
  // the body ended (`ended()` true: the last chunk came, or the server closed).
  std::optional<std::string> next_line(std::chrono::milliseconds timeout);
  bool ended() const;
  bool clean_end() const;  // the body ended with its last chunk (not a dropped connection)
  void close();            // as a client that goes away

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane
