#include "services/controlplane/api/audit_writes.hpp"

#include <nlohmann/json.hpp>

#include <utility>

#include "services/controlplane/audit/audit_log.hpp"

namespace mooring::controlplane::api {

namespace {

using json = nlohmann::json;

// The answer's JSON object; null for a body that is not one (a refusal's is {"Error"}).
json answer_of(const http::Response& res) {
  auto body = json::parse(res.body, nullptr, false);
  return body.is_object() ? body : json();
}

std::string string_at(const json& j, std::string_view key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// The "ID"s of the objects of an array, comma-separated.
std::string ids_of(const json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const auto& item : list) {
    const auto id = string_at(item, "ID");
    if (id.empty()) continue;
    out += (out.empty() ? "" : ",") + id;
  }
  return out;
}

std::string query_value(const http::Request& req, std::string_view name) {
  return std::string(req.param(name).value_or(""));
}

}  // namespace

bool is_write(std::string_view method) {
  return !method.empty() && method != "GET" && method != "HEAD" && method != "OPTIONS";
}

std::optional<std::uint64_t> UnparsedRefusals::take(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (last_ && now - *last_ < period_) {
    ++left_out_;
    return std::nullopt;
  }
  last_ = now;
  return std::exchange(left_out_, 0);
}

std::string answered_id(const http::Request&, const http::Response& res) { return string_at(answer_of(res), "ID"); }

std::string answered_accessor(const http::Request&, const http::Response& res) {
  return string_at(answer_of(res), "AccessorID");
}

std::string answered_volumes(const http::Request&, const http::Response& res) {
  const auto answer = answer_of(res);
  return answer.is_object() && answer.contains("Volumes") ? ids_of(answer["Volumes"]) : std::string{};
}

std::string answered_snapshots(const http::Request&, const http::Response& res) {
  const auto answer = answer_of(res);
  return answer.is_object() && answer.contains("Snapshots") ? ids_of(answer["Snapshots"]) : std::string{};
}

std::string answered_group_snapshot(const http::Request&, const http::Response& res) {
  const auto answer = answer_of(res);
  if (!answer.is_object() || !answer.contains("GroupSnapshot")) return {};
  const auto& group = answer["GroupSnapshot"];
  std::string out = string_at(group, "ID");
  if (group.is_object() && group.contains("Snapshots")) {
    const auto members = ids_of(group["Snapshots"]);
    if (!members.empty()) out += (out.empty() ? "" : ",") + members;
  }
  return out;
}

std::string answered_key(const http::Request&, const http::Response& res) { return string_at(answer_of(res), "KeyID"); }

std::string queried_snapshot(const http::Request& req, const http::Response&) {
  return query_value(req, "snapshot_id");
}

std::string queried_group_snapshot(const http::Request& req, const http::Response&) {
  return query_value(req, "group_snapshot_id");
}

std::string enrolled_node(const http::Request& req, const http::Response& res) {
  std::string node = req.params.empty() ? std::string{} : req.params.begin()->second;
  const auto intro = string_at(answer_of(res), "IntroductionAccessorID");
  return intro.empty() ? node : node + " (introduction token " + intro + ")";
}

std::string audited_object(AuditObject object, const http::Request& req, const http::Response& res) {
  if (object) return object(req, res);
  // Every route has at most one path parameter, and it names the object.
  return req.params.empty() ? std::string{} : req.params.begin()->second;
}

void audit_write(audit::AuditLog* log, const http::Request& req, const http::Response& res, const std::string& accessor,
                 std::string object, std::string ns) {
  if (!log || !is_write(req.method)) return;
  log->record(audit::Entry{.transport = "http",
                           .actor_type = accessor.empty() ? "anonymous" : "token",
                           .actor = accessor,
                           .remote = req.remote,
                           .via = req.via,
                           .method = req.method,
                           .path = req.path,
                           .ns = std::move(ns),
                           .object = std::move(object),
                           .status = res.status});
}

}  // namespace mooring::controlplane::api
