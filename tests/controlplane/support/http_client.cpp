#include "tests/controlplane/support/http_client.hpp"

#include <cctype>

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

}  // namespace mooring::controlplane
