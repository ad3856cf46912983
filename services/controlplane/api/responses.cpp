#include <nlohmann/json.hpp>

#include "services/controlplane/api/endpoints.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

http::Response json_ok(const nlohmann::json& body, unsigned status) {
  return http::json_response(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), status);
}

http::Response bad_request(std::string_view message) { return http::error_response(400, message); }

http::Response not_found(std::string_view kind, std::string_view id, std::string_view ns) {
  return http::error_response(404, std::string(kind) + " not found" + domain::in_namespace(ns) + ": " + std::string(id));
}

http::Response refused(const Refusal& r) {
  switch (r.kind) {
    case Refusal::Kind::invalid: return http::error_response(400, r.message);
    case Refusal::Kind::not_found: return http::error_response(404, r.message);
    case Refusal::Kind::conflict: return http::error_response(409, r.message);
    case Refusal::Kind::unavailable: return http::error_response(409, r.message);
  }
  return http::error_response(500, r.message);
}

http::Response write_failed(std::string_view what, const std::string& error) {
  log::Logger("api").error("state write failed", {{"what", what}, {"error", error}});
  return http::error_response(500, std::string(what) + ": state write failed: " + error);
}

http::Response failed(const volumes::Failure& f) {
  using Kind = volumes::Failure::Kind;
  switch (f.kind) {
    case Kind::invalid: return http::error_response(400, f.message);
    case Kind::not_found: return http::error_response(404, f.message);
    case Kind::conflict: return http::error_response(409, f.message);
    case Kind::forbidden: return http::error_response(403, f.message);
    case Kind::unimplemented: return http::error_response(501, f.message);
    case Kind::unavailable: return http::error_response(503, f.message);
    case Kind::timeout: return http::error_response(504, f.message);
    case Kind::plugin_error: return http::error_response(502, f.message);
    case Kind::state_write: return http::error_response(500, f.message);
  }
  return http::error_response(500, f.message);
}

bool parse_body(const http::Request& req, nlohmann::json& out, http::Response& error) {
  if (req.body.empty()) {
    error = bad_request("request body is empty; a JSON object is required");
    return false;
  }
  try {
    out = nlohmann::json::parse(req.body);
  } catch (const nlohmann::json::out_of_range& e) {
    // A number JSON allows but a double cannot hold (1e400): the client's input, not our bug.
    error = bad_request(std::string("request body has a number out of range: ") + e.what());
    return false;
  } catch (const nlohmann::json::exception& e) {
    error = bad_request(std::string("request body is not valid JSON: ") + e.what());
    return false;
  }
  if (!out.is_object()) {
    error = bad_request("request body must be a JSON object");
    return false;
  }
  return true;
}

bool path_id(const http::Request& req, std::string_view param, domain::IdKind kind, std::string& out,
             http::Response& error) {
  auto it = req.params.find(param);
  out = it == req.params.end() ? std::string{} : it->second;
  if (auto st = domain::validate_id(kind, out); !st) {
    error = bad_request(st.error());
    return false;
  }
  return true;
}

const std::string& request_namespace(const http::Request& req) {
  static const std::string fallback{domain::kDefaultNamespace};
  auto it = req.query.find("namespace");
  return it == req.query.end() ? fallback : it->second;
}

bool query_flag_set(const http::Request& req, std::string_view name) {
  auto v = req.param(name);
  return v && (*v == "true" || *v == "1" || v->empty());
}

bool query_flag(const http::Request& req, std::string_view name, bool& out, http::Response& error) {
  auto v = req.param(name);
  if (!v) return true;
  if (query_flag_set(req, name)) {
    out = true;
  } else if (*v == "false" || *v == "0") {
    out = false;
  } else {
    error = bad_request("query parameter \"" + std::string(name) + "\": must be true or false, got \"" +
                        std::string(*v) + "\"");
    return false;
  }
  return true;
}

}  // namespace mooring::controlplane::api
