// `mooring namespace list|status|apply|delete`: namespaces as objects, with their quotas. apply
// reads the namespace first and changes only what its flags name, so setting one limit keeps the
// others and the description.
#include <charconv>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

constexpr const char* kLimits[][2] = {{"max-volumes", "MaxVolumes"},
                                      {"max-capacity", "MaxCapacityBytes"},
                                      {"max-running-allocs", "MaxRunningAllocations"}};

std::string path_of(const std::string& name) { return "/v1/namespace/" + url_encode(name); }

std::string limit_text(const json& quota, const char* key, bool bytes) {
  if (!quota.is_object() || !quota.contains(key) || quota[key].is_null()) return "unlimited";
  const auto n = quota[key].get<std::int64_t>();
  return bytes ? human_bytes(n) : std::to_string(n);
}

// "none" clears a limit; sizes take units (10GiB), counts are plain integers.
std::optional<json> limit_value(const std::string& text, bool bytes) {
  if (text == "none") return json(nullptr);
  if (bytes) {
    auto size = parse_size(text);
    return size ? std::optional<json>(*size) : std::nullopt;
  }
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0) return std::nullopt;
  return json(n);
}

int list(Context& ctx, const Invocation&) {
  auto r = ctx.call("GET", "/v1/namespaces");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) return ctx.out() << "No namespaces found\n", kExitOk;
  Table t({"Name", "Description"});
  for (const auto& n : r->body) t.add_row({field(n, "Name"), field(n, "Description")});
  ctx.out() << t.render();
  return kExitOk;
}

int status(Context& ctx, const Invocation& inv) {
  auto r = ctx.call("GET", path_of(inv.args[0]));
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const auto& n = r->body;
  const json quota = n.value("Quota", json::object()), usage = n.value("Usage", json::object());
  KeyValues kv;
  kv.add("Name", field(n, "Name"));
  kv.add("Description", field(n, "Description"));
  kv.add("Volumes", std::to_string(field_int(usage, "Volumes")) + " of " + limit_text(quota, "MaxVolumes", false));
  kv.add("Requested Capacity",
         human_bytes(field_int(usage, "CapacityBytes")) + " of " + limit_text(quota, "MaxCapacityBytes", true));
  kv.add("Running Allocations", std::to_string(field_int(usage, "RunningAllocations")) + " of " +
                                    limit_text(quota, "MaxRunningAllocations", false));
  ctx.out() << kv.render();
  return kExitOk;
}

int apply(Context& ctx, const Invocation& inv) {
  const auto& name = inv.args[0];
  json body{{"Description", ""}, {"Quota", json::object()}};
  auto current = ctx.attempt("GET", path_of(name));
  if (auto* found = std::get_if<ApiReply>(&current)) {
    body["Description"] = found->body.value("Description", std::string());
    body["Quota"] = found->body.value("Quota", json::object());
  } else if (auto& failure = std::get<CallFailure>(current); failure.status != 404) {
    return ctx.fail(failure.message);
  }
  if (auto d = inv.flag("description")) body["Description"] = *d;
  for (const auto& [flag, key] : kLimits) {
    auto text = inv.flag(flag);
    if (!text) continue;
    const bool bytes = std::string_view(key) == "MaxCapacityBytes";
    auto value = limit_value(*text, bytes);
    if (!value)
      return ctx.fail("-" + std::string(flag) + ": " + (bytes ? "a size like 10GiB" : "a non-negative integer") +
                      " or \"none\", got \"" + *text + "\"");
    body["Quota"][key] = *value;
  }
  auto r = ctx.call("PUT", path_of(name), body);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Successfully applied namespace \"" << name << "\"!\n";
  return kExitOk;
}

int delete_one(Context& ctx, const Invocation& inv) {
  if (!ctx.call("DELETE", path_of(inv.args[0]))) return kExitError;
  ctx.out() << "Successfully deleted namespace \"" << inv.args[0] << "\"!\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> namespace_commands() {
  return {
      {.words = {"namespace", "list"}, .summary = "List the namespaces this token may read", .run = list},
      {.words = {"namespace", "status"},
       .arguments = "NAME",
       .min_args = 1,
       .max_args = 1,
       .summary = "Show a namespace, its quota and what it holds",
       .run = status},
      {.words = {"namespace", "apply"},
       .arguments = "NAME",
       .min_args = 1,
       .max_args = 1,
       .flags = {{"description", true, "TEXT", "the namespace's description"},
                 {"max-volumes", true, "N", "at most N volumes (\"none\": no limit)"},
                 {"max-capacity", true, "SIZE", "at most SIZE of requested capacity, e.g. 100GiB (\"none\": no limit)"},
                 {"max-running-allocs", true, "N", "at most N running allocations (\"none\": no limit)"}},
       .summary = "Create a namespace or change its description and quota (other fields are kept)",
       .run = apply},
      {.words = {"namespace", "delete"},
       .arguments = "NAME",
       .min_args = 1,
       .max_args = 1,
       .summary = "Delete a namespace that holds no volumes and no live allocations",
       .run = delete_one},
  };
}

}  // namespace mooring::cli
