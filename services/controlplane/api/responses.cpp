#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "services/controlplane/api/endpoints.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

http::Response json_ok(const nlohmann::json& body, unsigned status) {
  return http::json_response(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), status);
}

http::Response bad_request(std::string_view message) { return http::error_response(400, message); }

http::Response not_found(std::string_view kind, std::string_view id, std::string_view ns) {
  return http::error_response(404,
                              std::string(kind) + " not found" + domain::in_namespace(ns) + ": " + std::string(id));
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

http::Response retry_later(std::string_view message) {
  auto r = http::error_response(503, message);
  r.set_header("Retry-After", "1");
  return r;
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
    case Kind::unavailable: return retry_later(f.message);
    case Kind::timeout: return http::error_response(504, f.message);
    case Kind::plugin_error: return http::error_response(502, f.message);
    case Kind::state_write: return http::error_response(500, f.message);
  }
  return http::error_response(500, f.message);
}

namespace {

// Follows a parse to where it stops, to name the field there ("Task.Env.A", "Volumes[0].Name").
class FieldTracker final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    frames_.push_back({.array = false});
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    frames_.back().at_key = false;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    frames_.push_back({.array = true, .at_key = false});
    return true;
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception&) override {
    position = at;
    return false;
  }

  // "request body: field \"X\": <what>", or where the field's key itself is.
  std::string message(std::string_view what) const {
    std::string path;
    for (const auto& f : frames_) {
      // Appended piece by piece: GCC 12's -Wrestrict misfires at -O2 on `"" + key` (Release build).
      if (f.array) {
        path.append("[").append(std::to_string(f.index)).append("]");
      } else if (!f.at_key) {
        if (!path.empty()) path += '.';
        path += f.key;
      }
    }
    const bool at_key = !frames_.empty() && frames_.back().at_key;
    if (at_key)
      return "request body: a key" + (path.empty() ? "" : " in field " + domain::in_quotes(path)) + " is " +
             std::string(what);
    if (path.empty()) return "request body: " + std::string(what);
    return "request body: field " + domain::in_quotes(path) + ": " + std::string(what);
  }
  std::size_t position = 0;

 private:
  struct Frame {
    bool array;
    std::size_t index = 0;
    std::string key;
    bool at_key = true;  // an object expecting its next key
  };
  bool value() {  // a value ended inside the innermost container
    if (!frames_.empty()) {
      if (frames_.back().array)
        ++frames_.back().index;
      else
        frames_.back().at_key = true;
    }
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  std::vector<Frame> frames_;
};

// The 400 message for a body that is not well-formed UTF-8 where parsing stops; nullopt when it
// stops for another reason first.
std::optional<std::string> utf8_refusal(const std::string& body) {
  const auto valid = domain::utf8_prefix(body);
  if (valid == body.size()) return std::nullopt;
  FieldTracker tracker;
  (void)nlohmann::json::sax_parse(body, &tracker);
  if (tracker.position <= valid) return std::nullopt;
  return tracker.message("not valid UTF-8");
}

}  // namespace

bool parse_body(const http::Request& req, nlohmann::json& out, http::Response& error) {
  if (req.body.empty()) {
    error = bad_request("request body is empty; a JSON object is required");
    return false;
  }
  if (auto bad = utf8_refusal(req.body)) {
    error = bad_request(*bad);
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
