// API room: the REST API as a pure request -> response layer over the state store. No sockets:
// the HTTP server hands requests in; tests co_spawn handle() on an io_context. Routing, CORS, blocking
// queries (?index=N&wait=D) and error shapes ({"Error":"..."}) live here; each endpoint is a
// coroutine in one of the *_endpoints.cpp files, registered once. Volume lifecycle work (create,
// delete, expand, snapshots, detach) is the volumes room's; the endpoints only translate.
//
// Blocking queries: with `index=N` a read waits until its table's index exceeds N or `wait`
// passes (default 5m, capped at 10m, plus up to wait/16 of jitter so dashboards do not wake in
// lockstep — Nomad's numbers), then answers with the current data. The index is sent as
// X-Mooring-Index and X-Nomad-Index (never 0, so clients cannot spin on index=0).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "services/controlplane/acl/capability.hpp"
#include "services/controlplane/http/cors.hpp"
#include "services/controlplane/http/message.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane {
class StateStore;
namespace volumes {
class VolumeLifecycle;
}
namespace secrets {
class SealedBackend;
}
namespace audit {
class AuditLog;
}
}  // namespace mooring::controlplane

namespace mooring::controlplane::api {

struct ApiOptions {
  http::CorsPolicy cors;
  std::chrono::milliseconds default_wait{std::chrono::minutes(5)};
  std::chrono::milliseconds max_wait{std::chrono::minutes(10)};
  secrets::SealedBackend* keyring = nullptr;  // the state's sealing layer, for keyring rotation
  audit::AuditLog* audit = nullptr;           // every write (any answer) gets a line there
  // ACLs (--acl): every request is checked against its route's need (see acl/acl.hpp). A request
  // without a token gets the `anonymous` policy when there is one; 401 when that is not enough.
  bool acl = false;
  // GET /v1/event/stream sends {} after this long without an event (Nomad: 10 s).
  std::chrono::milliseconds event_heartbeat{std::chrono::seconds(10)};
  // Node enrollment (POST /v1/node/:id/enroll) signs with this CA; without a key it answers 501.
  tls::PairPaths enrollment_ca;
  // How long the certificates enrollment signs last (--node-cert-ttl).
  std::chrono::seconds node_cert_ttl{std::chrono::hours(24 * 7)};
  // When the leader last heard from a node (nodes/liveness.hpp), shown as a node's LastHeartbeat
  // when later than the stored one (heartbeats are not committed). None: the stored time.
  std::function<std::optional<domain::Time>(const std::string& node_id)> last_heard;
};

// A route and what it needs: the route table, for tests that walk every route.
struct RouteInfo {
  std::string method;
  std::string pattern;  // "/v1/volume/csi/:id"
  acl::Need need;
};

class Api {
 public:
  Api(StateStore& store, volumes::VolumeLifecycle& volumes, ApiOptions options = {});
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // The HTTP server's handler. Runs on the store's executor. Every write gets an audit line
  // (ApiOptions::audit) naming its caller, object and answer; an exception is answered 500 (a
  // forced shutdown's cancellation 503) and audited too.
  boost::asio::awaitable<http::Response> handle(http::Request request);
  // A request answered without the API (http::Refused: the server could not read it or refused
  // its framing, or the handler threw; or the HA front refused it): audited when it is a write
  // or its method is unknown.
  void record_refusal(const http::Request& request, const http::Response& response);

  // Every route, in the order they are tried. No route without a declared need gets here: the
  // route-table test fails on one.
  static std::vector<RouteInfo> route_table();

 private:
  struct Answered {
    std::string accessor;                    // the token that asked (ACLs on), for the audit log
    std::string_view pattern = "unmatched";  // the route, for mooring_http_requests_seconds
    // The route's audit object, when its path names none (routes.hpp)
    std::string (*object)(const http::Request&, const http::Response&) = nullptr;
    std::chrono::steady_clock::time_point started;  // after a blocking query's wait
  };
  boost::asio::awaitable<http::Response> answer(http::Request& request, Answered& answered);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::api
