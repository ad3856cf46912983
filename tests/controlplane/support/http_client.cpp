#include "tests/controlplane/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace mooring::controlplane {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

struct HttpConnection::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  boost::beast::flat_buffer buffer;
  std::string connect_error;

  HttpResult read_response(bool head = false) {
    HttpResult out;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.skip(head);  // a HEAD response announces a length but carries no body
    parser.body_limit(64 * 1024 * 1024);
    boost::system::error_code ec;
    bhttp::read(socket, buffer, parser, ec);
    if (ec) {
      out.error = ec.message();
      return out;
    }
    auto res = parser.release();
    out.status = res.result_int();
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    out.body = res.body();
    return out;
  }
};

HttpConnection::HttpConnection(std::uint16_t port) : impl_(std::make_unique<Impl>()) {
  boost::system::error_code ec;
  impl_->socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) impl_->connect_error = ec.message();
}

HttpConnection::~HttpConnection() = default;

bool HttpConnection::open() const { return impl_->connect_error.empty() && impl_->socket.is_open(); }

HttpResult HttpConnection::request(const std::string& method, const std::string& target, const std::string& body,
                                   const std::map<std::string, std::string>& headers) {
  if (!impl_->connect_error.empty()) return HttpResult{0, {}, {}, impl_->connect_error};
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  if (!body.empty() || method == "PUT" || method == "POST") req.prepare_payload();
  boost::system::error_code ec;
  bhttp::write(impl_->socket, req, ec);
  if (ec) return HttpResult{0, {}, {}, ec.message()};
  return impl_->read_response(method == "HEAD");
}

HttpResult HttpConnection::raw(const std::string& bytes) {
  if (!impl_->connect_error.empty()) return HttpResult{0, {}, {}, impl_->connect_error};
  boost::system::error_code ec;
  asio::write(impl_->socket, asio::buffer(bytes), ec);
  if (ec) return HttpResult{0, {}, {}, ec.message()};
  return impl_->read_response();
}

HttpResult http_request(std::uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers) {
  HttpConnection c(port);
  auto h = headers;
  h.emplace("Connection", "close");
  return c.request(method, target, body, h);
}

// Plain sockets and a hand-written chunk decoder: what a minimal streaming client does, with
// nothing that would hide how the server frames the body.
struct HttpLineStream::Impl {
  int fd = -1;
  unsigned status = 0;
  std::map<std::string, std::string> headers;
  std::string raw;         // bytes read, not decoded yet
  std::string body;        // decoded body, not handed out yet
  bool chunked = false;
  bool eof = false;        // the socket ended
  bool last_chunk = false;

  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (eof) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count()))) <= 0) return false;
    char buf[4096];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      eof = true;
      return false;
    }
    raw.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  // Moves whole chunks from raw into body.
  void decode() {
    if (!chunked) {
      body += raw;
      raw.clear();
      return;
    }
    while (!last_chunk) {
      const auto crlf = raw.find("\r\n");
      if (crlf == std::string::npos) return;
      const auto size = std::stoul(raw.substr(0, crlf), nullptr, 16);
      if (size == 0) {
        last_chunk = true;
        return;
      }
      if (raw.size() < crlf + 2 + size + 2) return;
      body += raw.substr(crlf + 2, size);
      raw.erase(0, crlf + 2 + size + 2);
    }
  }
};

HttpLineStream::HttpLineStream(std::uint16_t port, const std::string& target,
                               const std::map<std::string, std::string>& headers)
    : impl_(std::make_unique<Impl>()) {
  impl_->fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(impl_->fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "\r\n";
  if (::send(impl_->fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t end;
  while ((end = impl_->raw.find("\r\n\r\n")) == std::string::npos)
    if (!impl_->fill(deadline)) return;
  const std::string head = impl_->raw.substr(0, end);
  impl_->raw.erase(0, end + 4);
  impl_->status = static_cast<unsigned>(std::stoul(head.substr(head.find(' ') + 1, 3)));
  for (std::size_t pos = head.find("\r\n"); pos != std::string::npos;) {
    const auto next = head.find("\r\n", pos + 2);
    const auto line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      impl_->headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    pos = next;
  }
  impl_->chunked = header("transfer-encoding") == "chunked";
}

HttpLineStream::~HttpLineStream() { close(); }

unsigned HttpLineStream::status() const { return impl_->status; }

std::string HttpLineStream::header(const std::string& lower) const {
  auto it = impl_->headers.find(lower);
  return it == impl_->headers.end() ? std::string{} : it->second;
}

std::optional<std::string> HttpLineStream::next_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    impl_->decode();
    if (auto nl = impl_->body.find('\n'); nl != std::string::npos) {
      std::string line = impl_->body.substr(0, nl);
      impl_->body.erase(0, nl + 1);
      return line;
    }
    if (ended() || impl_->fd < 0 || !impl_->fill(deadline)) return std::nullopt;
  }
}

bool HttpLineStream::ended() const { return impl_->last_chunk || impl_->eof; }
bool HttpLineStream::clean_end() const { return impl_->last_chunk; }

void HttpLineStream::close() {
  if (impl_->fd >= 0) ::close(impl_->fd);
  impl_->fd = -1;
}

}  // namespace mooring::controlplane
