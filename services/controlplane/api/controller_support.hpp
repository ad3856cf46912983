// API room, controller endpoints: what the volume and snapshot endpoints share (answers for a
// failed controller call, secrets from the header, paging and plugin capability checks). Only
// the *_endpoints.cpp files of the controller routes include it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "csi/v1/csi.pb.h"
#include "shared/async/retry.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

using domain::in_quotes;
using json = nlohmann::json;
using StringMap = std::map<std::string, std::string>;

// The HTTP answer for a controller call that did not succeed; `message` (default: the result's
// error) is the error text.
template <class R>
http::Response plugin_failure(const R& r, std::string_view message = {}) {
  if (message.empty()) message = r.error;
  if (r.no_target) return http::error_response(503, message);
  unsigned status = 502;
  switch (r.status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: status = 400; break;
    case grpc::StatusCode::NOT_FOUND: status = 404; break;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION: status = 409; break;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: status = 403; break;
    case grpc::StatusCode::UNIMPLEMENTED: status = 501; break;
    case grpc::StatusCode::DEADLINE_EXCEEDED: status = 504; break;
    case grpc::StatusCode::UNAVAILABLE: status = 503; break;
    default: break;
  }
  return http::error_response(status, message);
}

// A DeleteVolume answer that says the volume is still there and nothing is in progress (a
// final error, or FAILED_PRECONDITION: in use or has snapshots), from every controller asked.
template <class R>
bool not_deleted(const R& r) {
  return !r.no_target && !r.uncertain_earlier &&
         (r.outcome == csi::Outcome::final_error || r.outcome == csi::Outcome::retry);
}

// A failed page of a plugin listing: ABORTED for a token the plugin no longer knows is the
// caller's to fix (restart the listing); anything else as plugin_failure.
template <class R>
http::Response listing_failure(const R& r, const std::string& token, const std::string& plugin_id) {
  if (r.status.error_code() == grpc::StatusCode::ABORTED && !token.empty())
    return bad_request("query parameter \"next_token\": no longer valid for plugin " + in_quotes(plugin_id) +
                       "; restart the listing without it");
  return plugin_failure(r);
}

// Volume secrets, then body secrets, then header secrets: the later wins.
inline bool header_secrets(const http::Request& req, StringMap& out, http::Response& err) {
  for (auto name : {"x-nomad-csi-secrets", "x-mooring-csi-secrets"}) {
    auto h = req.header(name);
    if (h.empty()) continue;
    auto parsed = parse_secrets_header(h);
    if (!parsed) {
      err = bad_request(std::string("header ") + (name[2] == 'n' ? "X-Nomad-CSI-Secrets" : "X-Mooring-CSI-Secrets") +
                        ": " + parsed.error());
      return false;
    }
    for (auto& [k, v] : *parsed) out[k] = v;
  }
  return true;
}

inline void put_secrets(google::protobuf::Map<std::string, std::string>* dst, const StringMap& src) {
  for (const auto& [k, v] : src) (*dst)[k] = v;
}

inline bool controller_supports(const domain::Plugin& p, bool domain::ControllerInfo::*flag) {
  for (const auto& [n, inst] : p.controllers)
    if (inst.controller_info && (*inst.controller_info).*flag) return true;
  return false;
}

inline bool page_params(const http::Request& req, std::int32_t& max_entries, std::string& token, http::Response& err) {
  if (auto pp = req.param("per_page")) {
    try {
      std::size_t used = 0;
      long n = std::stol(std::string(*pp), &used);
      if (used != pp->size() || n < 0 || n > 100000) throw std::invalid_argument("range");
      max_entries = static_cast<std::int32_t>(n);
    } catch (const std::exception&) {
      err = bad_request("query parameter \"per_page\": must be a non-negative integer, got \"" + std::string(*pp) + "\"");
      return false;
    }
  }
  token = std::string(req.param("next_token").value_or(""));
  return true;
}

inline bool required_param(const http::Request& req, std::string_view name, std::string& out, http::Response& err) {
  out = std::string(req.param(name).value_or(""));
  if (out.empty()) {
    err = bad_request("query parameter \"" + std::string(name) + "\" is required");
    return false;
  }
  return true;
}

inline json snapshot_json(const ::csi::v1::Snapshot& s, const std::string& plugin_id, const StateStore& store,
                   const std::string& name = {}) {
  std::string source;
  for (const auto& [id, v] : store.volumes())
    if (v.plugin_id == plugin_id && v.external_id == s.source_volume_id()) {
      source = id;
      break;
    }
  json j = {{"ID", s.snapshot_id()},
            {"ExternalSourceVolumeID", s.source_volume_id()},
            {"SourceVolumeID", source},
            {"SizeBytes", s.size_bytes()},
            {"CreateTime", s.creation_time().seconds()},
            {"IsReady", s.ready_to_use()},
            {"PluginID", plugin_id}};
  if (!name.empty()) j["Name"] = name;
  return j;
}

// A negation is retried for up to an hour (1 s -> 30 s); it is logged if it gives up.
inline async::RetryOptions negation_retry() {
  async::RetryOptions o;
  o.backoff.initial = std::chrono::seconds(1);
  o.backoff.max = std::chrono::seconds(30);
  o.backoff.max_elapsed = std::chrono::hours(1);
  return o;
}

}  // namespace mooring::controlplane::api
