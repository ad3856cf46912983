// API room (internal): the endpoint functions and what they share. An endpoint parses the request,
// reads the state store or calls the volumes room, and turns the answer into a response. Every
// endpoint is a coroutine, so each route is registered once whether it waits or not.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "services/controlplane/acl/acl.hpp"
#include "services/controlplane/claims/refusal.hpp"
#include "services/controlplane/http/message.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/outcome.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::metrics {
struct GaugeSnapshot;
}

namespace mooring::controlplane {

namespace volumes {
class VolumeLifecycle;
struct Snapshot;
struct Asker;
}  // namespace volumes
namespace secrets {
class SealedBackend;
}

namespace api {

struct Context {
  StateStore& store;
  volumes::VolumeLifecycle& volumes;
  secrets::SealedBackend* sealed = nullptr;  // none: keyring rotation answers 501
  bool acl_enabled = false;                  // --acl: the ACL endpoints answer, every route checks its need
  tls::PairPaths enrollment_ca;              // the CA that signs enrolled nodes; no key: enrollment answers 501
  std::function<std::optional<domain::Time>(const std::string&)> last_heard;  // ApiOptions::last_heard
  std::chrono::seconds node_cert_ttl{std::chrono::hours(24 * 7)};             // ApiOptions::node_cert_ttl
  log::Logger log{"api"};
};

using Answer = boost::asio::awaitable<http::Response>;
using Endpoint = Answer (*)(Context&, const http::Request&);

// An endpoint that never waits, as an Endpoint: a coroutine that answers at once.
template <http::Response (*Now)(Context&, const http::Request&)>
Answer at_once(Context& ctx, const http::Request& req) {
  co_return Now(ctx, req);
}

// ---- shared response helpers ----
http::Response json_ok(const nlohmann::json& body, unsigned status = 200);
http::Response bad_request(std::string_view message);
// "volume not found: <id>", or "volume not found in namespace \"ns\": <id>" outside the default.
http::Response not_found(std::string_view kind, std::string_view id, std::string_view ns = domain::kDefaultNamespace);
http::Response refused(const Refusal& r);                                      // 400/404/409 by kind
http::Response write_failed(std::string_view what, const std::string& error);  // 500, logged
// 503 with Retry-After: nothing can serve it now, and soon something may (an agent not heard
// from yet, a plugin not fingerprinted yet, no healthy controller).
http::Response retry_later(std::string_view message);
http::Response failed(const volumes::Failure& f);  // by kind (unavailable: retry_later)
// Parses the body as JSON; on failure `error` is the 400 to return.
bool parse_body(const http::Request& req, nlohmann::json& out, http::Response& error);
// The path parameter, validated as an id of that kind; on failure `error` is the 400 to return.
bool path_id(const http::Request& req, std::string_view param, domain::IdKind kind, std::string& out,
             http::Response& error);
// The namespace the request acts in: resolved and validated before the endpoint runs (?namespace=,
// a Namespace in the body, or "default"); "*" on the lists that take it (every namespace, each
// item then filtered by what the caller may read).
inline constexpr std::string_view kAnyNamespace = "*";
const std::string& request_namespace(const http::Request& req);
// true/false query flags ("force=true"); anything else is a 400.
bool query_flag(const http::Request& req, std::string_view name, bool& out, http::Response& error);
// Whether query_flag reads the flag as true ("true", "1", or present without a value): what a
// route's extra need is checked on, so no spelling the endpoint takes slips past it.
bool query_flag_set(const http::Request& req, std::string_view name);

// ---- volumes (volume_endpoints.cpp) ----
http::Response list_volumes(Context&, const http::Request&);
Answer get_volume(Context&, const http::Request&);  // ?stats=refresh polls the claims' nodes first
// What a blocking GET of one object waits on: that object's modify index, or nullopt when the
// request names no stored object (or its answer shows more than the object): then the table.
std::optional<std::uint64_t> volume_watch_index(const StateStore&, const http::Request&);
Answer register_volume(Context&, const http::Request&);   // PUT /v1/volume/csi/:id (may expand)
Answer register_volumes(Context&, const http::Request&);  // PUT /v1/volumes
Answer deregister_volume(Context&, const http::Request&);
Answer create_volume(Context&, const http::Request&);  // PUT /v1/volume/csi/:id/create
Answer modify_volume(Context&, const http::Request&);  // PUT /v1/volume/csi/:id/modify
Answer delete_volume(Context&, const http::Request&);  // DELETE /v1/volume/csi/:id/delete
Answer detach_volume(Context&, const http::Request&);  // DELETE /v1/volume/csi/:id/detach?node=
Answer list_external_volumes(Context&, const http::Request&);

// ---- claims as objects (claim_endpoints.cpp) ----
http::Response list_claims(Context&, const http::Request&);  // GET /v1/volumes/claims?volume=&node=&allocation=&state=
http::Response get_claim(Context&, const http::Request&);    // GET /v1/volumes/claim/:id ("<volume>:<allocation>")
http::Response release_claim(Context&, const http::Request&);  // DELETE /v1/volumes/claim/:id

// ---- snapshots (snapshot_endpoints.cpp) ----
Answer create_snapshots(Context&, const http::Request&);
Answer delete_snapshot(Context&, const http::Request&);
Answer list_snapshots(Context&, const http::Request&);
// One snapshot as the API shows it (also a group snapshot's member).
nlohmann::json snapshot_json(const volumes::Snapshot& s);

// ---- group snapshots (group_snapshot_endpoints.cpp) ----
Answer create_group_snapshot(Context&, const http::Request&);  // PUT /v1/volumes/group-snapshot
Answer list_group_snapshots(Context&, const http::Request&);   // GET /v1/volumes/group-snapshot?plugin_id=
Answer get_group_snapshot(Context&, const http::Request&);     // GET /v1/volumes/group-snapshot/:id?plugin_id=
Answer delete_group_snapshot(Context&, const http::Request&);  // DELETE ...?plugin_id=&group_snapshot_id=

// ---- plugins, nodes, events, status ----
http::Response list_plugins(Context&, const http::Request&);
http::Response get_plugin(Context&, const http::Request&);
http::Response list_nodes(Context&, const http::Request&);
http::Response get_node(Context&, const http::Request&);
http::Response purge_node(Context&, const http::Request&);
// ---- eligibility and drain (node_drain_endpoints.cpp) ----
http::Response set_node_eligibility(Context&, const http::Request&);  // PUT /v1/node/:id/eligibility
http::Response drain_node(Context&, const http::Request&);            // PUT /v1/node/:id/drain
// ---- node identity (enrollment_endpoints.cpp) ----
http::Response create_node_introduction(Context&, const http::Request&);  // POST /v1/node/:id/intro
http::Response enroll_node(Context&, const http::Request&);               // POST /v1/node/:id/enroll
http::Response get_node_identity(Context&, const http::Request&);         // GET /v1/node/:id/identity
http::Response list_events(Context&, const http::Request&);
http::Response health(Context&, const http::Request&);
http::Response ready(Context&, const http::Request&);

// ---- the web dashboard (ui_endpoints.cpp): GET /ui/ and its files; "/" and "/ui" redirect ----
http::Response serve_ui(Context&, const http::Request&);

// ---- operator (operator_endpoints.cpp) ----
Answer rotate_keyring(Context&, const http::Request&);  // PUT|POST /v1/operator/keyring/rotate

// ---- metrics (metrics_endpoints.cpp) ----
// mooring_claims{state} and mooring_plugin_healthy{plugin,node,kind}, from the state as it is now.
std::vector<metrics::GaugeSnapshot> state_gauges(const StateStore& store);
http::Response get_metrics(Context&, const http::Request&);  // GET /v1/metrics[?format=json]

// ---- allocations ----
http::Response list_allocations(Context&, const http::Request&);
http::Response get_allocation(Context&, const http::Request&);
std::optional<std::uint64_t> allocation_watch_index(const StateStore&, const http::Request&);  // as volume_watch_index
http::Response submit_allocation(Context&, const http::Request&);
http::Response stop_allocation(Context&, const http::Request&);
http::Response update_allocation(Context&, const http::Request&);  // PUT /v1/allocation/:id: rolling update of a plugin
// The body asks for volumes (so submitting it needs csi-mount-volume too).
bool requests_volumes(const http::Request&);
// The body's Task (a submit's Allocation.Task, an update's Task) has a CSIPlugin: it deploys a
// plugin that serves every namespace (plugin:write too).
bool deploys_plugin(const http::Request&);
// The allocation the path names (in the request's namespace) runs a CSIPlugin task.
bool names_plugin_allocation(const StateStore& store, const http::Request& req);

// ---- namespaces (namespace_endpoints.cpp) ----
http::Response list_namespaces(Context&, const http::Request&);   // GET /v1/namespaces
http::Response get_namespace(Context&, const http::Request&);     // GET /v1/namespace/:name (with its Usage)
http::Response put_namespace(Context&, const http::Request&);     // PUT /v1/namespace/:name
http::Response delete_namespace(Context&, const http::Request&);  // DELETE /v1/namespace/:name
// A caller may read a namespace it may act in (any capability there) or with operator:read.
bool may_read_namespace(const acl::Acl& acl, std::string_view name);

// ---- ACLs (acl_endpoints.cpp) ----
// The request's SecretID: X-Mooring-Token, X-Nomad-Token or "Authorization: Bearer"; empty when none.
std::string request_secret(const http::Request& req);
// The request carries a valid (known, unexpired) management token. False with ACLs off.
bool is_management_request(Context& ctx, const http::Request& req);
// Who a request's token names (ACLs on): its compiled policies, its name for refusals and its
// AccessorID for the audit log; without a token, "anonymous" under the anonymous policy (none:
// no rights). The error is the 401's text: an unknown or expired token.
struct Caller {
  acl::Acl acl;
  std::string name;      // the token's name, or "anonymous"
  std::string accessor;  // the token's AccessorID (audit log); empty when anonymous
};
domain::Expected<Caller> request_caller(Context& ctx, const http::Request& req);
// The request's caller as the volumes room asks about plugin-level objects, in the request's
// namespace: every right with ACLs off. Name it before handing it to a coroutine: GCC 12
// mishandles class temporaries passed by value to one (docs/engineering-notes.md).
volumes::Asker request_asker(Context& ctx, const http::Request& req);
http::Response acl_bootstrap(Context&, const http::Request&);
http::Response put_acl_policy(Context&, const http::Request&);
http::Response list_acl_policies(Context&, const http::Request&);
http::Response get_acl_policy(Context&, const http::Request&);
http::Response delete_acl_policy(Context&, const http::Request&);
http::Response create_acl_token(Context&, const http::Request&);
http::Response list_acl_tokens(Context&, const http::Request&);
http::Response acl_token_self(Context&, const http::Request&);
http::Response get_acl_token(Context&, const http::Request&);
http::Response delete_acl_token(Context&, const http::Request&);

}  // namespace api
}  // namespace mooring::controlplane
