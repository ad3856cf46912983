// API room: the REST API as a pure request -> response layer over the state store. No sockets:
// the HTTP server hands requests in; tests call handle_now() directly. Routing, CORS, blocking
// queries (?index=N&wait=D) and error shapes ({"Error":"..."}) live here; each endpoint is a
// plain function in one of the *_endpoints.cpp files.
//
// Blocking queries: with `index=N` a read waits until its table's index exceeds N or `wait`
// passes (default 5m, capped at 10m, plus up to wait/16 of jitter so dashboards do not wake in
// lockstep — Nomad's numbers), then answers with the current data. The index is sent as
// X-Mooring-Index and X-Nomad-Index (never 0, so clients cannot spin on index=0).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "services/controlplane/http/cors.hpp"
#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::api {

struct ApiOptions {
  http::CorsPolicy cors;
  std::chrono::milliseconds default_wait{std::chrono::minutes(5)};
  std::chrono::milliseconds max_wait{std::chrono::minutes(10)};
};

class Api {
 public:
  explicit Api(StateStore& store, ApiOptions options = {});
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // The HTTP server's handler. Runs on the store's executor.
  boost::asio::awaitable<http::Response> handle(http::Request request);
  // Same routing and endpoints, never waits (blocking-query parameters only select the index).
  // An asynchronous route answers 500 here: it can only be served by handle().
  http::Response handle_now(http::Request request);

  // Endpoints that await other services (controller calls through node agents) are added at
  // wiring time. Such a route wins over a synchronous one for the same method and path, so it
  // may serve some requests itself and hand the rest to `fallback_sync` (the built-in endpoint).
  using AsyncEndpoint = std::function<boost::asio::awaitable<http::Response>(const http::Request&)>;
  void add_async_route(std::string_view method, std::string_view path, AsyncEndpoint endpoint);
  // The built-in synchronous endpoint for this method and path, applied to a request that has
  // already been routed (path parameters set). 404 when there is none.
  http::Response fallback_sync(const http::Request& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::api
