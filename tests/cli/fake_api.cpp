#include "tests/cli/fake_api.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <thread>

namespace mooring::cli {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace ssl = asio::ssl;
using asio::ip::tcp;

struct FakeApi::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  unsigned short port = acceptor.local_endpoint().port();  // read once: the io thread owns the acceptor
  mutable std::mutex mu;
  std::map<std::string, CannedResponse> canned;
  std::vector<RecordedRequest> recorded;
  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      if (!tls) {
        serve(socket);
      } else {
        ssl::stream<tcp::socket&> secure(socket, *tls);
        if (secure.handshake(ssl::stream_base::server, ec); !ec) serve(secure);
      }
      socket.shutdown(tcp::socket::shutdown_both, ec);
      accept();
    });
  }

  // One request per connection (the CLI sends Connection: close); blocking is fine for a test.
  template <class Stream>
  void serve(Stream& stream) {
    boost::beast::flat_buffer buffer;
    bhttp::request<bhttp::string_body> req;
    boost::system::error_code ec;
    bhttp::read(stream, buffer, req, ec);
    if (ec) return;
    RecordedRequest rec{std::string(req.method_string()), std::string(req.target()), req.body(), {}};
    for (const auto& f : req) {
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      rec.headers[name] = std::string(f.value());
    }
    CannedResponse answer{404, R"({"Error":"no such endpoint: )" + rec.target + R"("})", {}};
    {
      std::lock_guard lock(mu);
      recorded.push_back(rec);
      if (auto it = canned.find(rec.method + " " + rec.target); it != canned.end()) answer = it->second;
    }
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(answer.status), 11};
    res.set(bhttp::field::content_type, "application/json");
    for (const auto& [k, v] : answer.headers) res.set(k, v);
    res.body() = answer.body;
    res.prepare_payload();
    bhttp::write(stream, res, ec);
  }
};

FakeApi::FakeApi() : impl_(std::make_unique<Impl>()) {
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeApi::FakeApi(const FakeApiTls& tls) : impl_(std::make_unique<Impl>()) {
  impl_->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
  impl_->tls->use_certificate_chain_file(tls.cert_file);
  impl_->tls->use_private_key_file(tls.key_file, ssl::context::pem);
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeApi::~FakeApi() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->thread.join();
}

void FakeApi::on(const std::string& method, const std::string& target, CannedResponse response) {
  std::lock_guard lock(impl_->mu);
  impl_->canned[method + " " + target] = std::move(response);
}

std::string FakeApi::url() const {
  return (impl_->tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(impl_->port);
}

std::vector<RecordedRequest> FakeApi::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->recorded;
}

}  // namespace mooring::cli
