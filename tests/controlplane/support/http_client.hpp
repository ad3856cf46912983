// Test support: a blocking HTTP/1.1 client over a real socket, one connection per request unless
// a Connection is kept. Beast stays in the .cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

}  // namespace mooring::controlplane
