// API room (internal): the endpoint functions and what they share. Each endpoint reads the state
// store, applies the pure rules, commits at most one batch, and returns a response value.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "services/controlplane/claims/refusal.hpp"
#include "services/controlplane/http/message.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::api {

struct Context {
  StateStore& store;
  log::Logger log{"api"};
};

using Endpoint = http::Response (*)(Context&, const http::Request&);

// ---- shared response helpers ----
http::Response json_ok(const nlohmann::json& body, unsigned status = 200);
http::Response bad_request(std::string_view message);
http::Response not_found(std::string_view kind, std::string_view id);  // "volume not found: <id>"
http::Response refused(const Refusal& r);                             // 400/404/409 by kind
http::Response write_failed(std::string_view what, const std::string& error);  // 500, logged
// Parses the body as JSON; on failure `error` is the 400 to return.
bool parse_body(const http::Request& req, nlohmann::json& out, http::Response& error);
// The path parameter, validated as an id of that kind; on failure `error` is the 400 to return.
bool path_id(const http::Request& req, std::string_view param, domain::IdKind kind, std::string& out,
             http::Response& error);
// true/false query flags ("force=true"); anything else is a 400.
bool query_flag(const http::Request& req, std::string_view name, bool& out, http::Response& error);

// ---- volumes ----
http::Response list_volumes(Context&, const http::Request&);
http::Response get_volume(Context&, const http::Request&);
http::Response register_volume(Context&, const http::Request&);   // PUT /v1/volume/csi/:id
http::Response register_volumes(Context&, const http::Request&);  // PUT /v1/volumes
http::Response deregister_volume(Context&, const http::Request&);

// ---- plugins, nodes, events, status ----
http::Response list_plugins(Context&, const http::Request&);
http::Response get_plugin(Context&, const http::Request&);
http::Response list_nodes(Context&, const http::Request&);
http::Response get_node(Context&, const http::Request&);
http::Response purge_node(Context&, const http::Request&);
http::Response list_events(Context&, const http::Request&);
http::Response health(Context&, const http::Request&);
http::Response ready(Context&, const http::Request&);

// ---- allocations ----
http::Response list_allocations(Context&, const http::Request&);
http::Response get_allocation(Context&, const http::Request&);
http::Response submit_allocation(Context&, const http::Request&);
http::Response stop_allocation(Context&, const http::Request&);

}  // namespace mooring::controlplane::api
