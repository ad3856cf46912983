// `mooring alloc ...`: run (submit), stop, status.
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/json_file.hpp"
#include "cli/lookup.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

std::string alloc_path(const std::string& id) { return "/v1/allocation/" + url_encode(id); }

int alloc_run(Context& ctx, const Invocation& inv) {
  auto doc = read_json_file(inv.args[0]);
  if (!doc) return ctx.fail(doc.error());
  if (!doc->is_object())
    return ctx.fail(inv.args[0] + ": expected a JSON object ({\"Allocation\":{...}} or one allocation)");
  // The API's submit body is {"Allocation":{...}}; a bare allocation object is wrapped.
  json body = doc->contains("Allocation") ? *doc : json{{"Allocation", *doc}};
  auto r = ctx.call("POST", "/v1/allocations", body);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  std::string id = field(r->body, "ID"), node = field(r->body, "NodeID");
  ctx.out() << "Allocation \"" << id << "\" submitted"
            << (node.empty() ? " (waiting for placement)" : " to node \"" + node + "\"") << "\n";
  return kExitOk;
}

bool is_terminal_status(const std::string& client_status) {
  return client_status == "complete" || client_status == "failed" || client_status == "lost";
}

std::string alloc_table(const json& allocs, bool spans) {
  std::vector<std::string> headers{"ID", "Name", "Node ID", "Desired", "Status"};
  if (spans) headers.insert(headers.begin() + 2, "Namespace");
  Table t(headers);
  for (const auto& a : allocs) {
    std::vector<std::string> row{field(a, "ID"), field(a, "Name"), field(a, "NodeID"), field(a, "DesiredStatus"),
                                 field(a, "ClientStatus")};
    if (spans) row.insert(row.begin() + 2, field(a, "Namespace"));
    t.add_row(std::move(row));
  }
  return t.render();
}

// An allocation named by its ID, a unique ID prefix, or the name of the one allocation of that
// name that still runs (IDs are generated; names are what people remember, as with Nomad's jobs).
// Several matches are listed, as for every status command (lookup.hpp).
std::optional<std::string> resolve_alloc(Context& ctx, const std::string& ref) {
  auto r = ctx.call("GET", "/v1/allocations");
  if (!r) return std::nullopt;
  json by_name = json::array();
  for (const auto& a : r->body.is_array() ? r->body : json::array()) {
    if (field(a, "ID") == ref) return ref;
    if (field(a, "Name") == ref && !is_terminal_status(field(a, "ClientStatus")) && field(a, "DesiredStatus") != "stop")
      by_name.push_back(a);
  }
  const json by_prefix = matching_prefix(r->body, ref);
  const json& found = by_prefix.empty() ? by_name : by_prefix;
  if (found.size() == 1) return field(found[0], "ID");
  if (found.empty()) {
    ctx.fail("no allocation has the ID, ID prefix or running name \"" + ref + "\" (`mooring alloc status` lists them)");
    return std::nullopt;
  }
  const ObjectKind kind{
      "allocation",           "allocations",
      "/v1/allocation/",      "/v1/allocations",
      "mooring alloc status", [&](const json& items) { return alloc_table(items, ctx.every_namespace()); }};
  report_candidates(ctx, kind, ref, found);
  return std::nullopt;
}

int alloc_stop(Context& ctx, const Invocation& inv) {
  const auto resolved = resolve_alloc(ctx, inv.args[0]);
  if (!resolved) return kExitError;
  const std::string& id = *resolved;
  auto r = ctx.call("POST", alloc_path(id) + "/stop");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out()
      << "Stop of allocation \"" << id
      << "\" requested; its volumes are released in the background (`mooring volume status ID` shows the claims)\n";
  return kExitOk;
}

void print_alloc(Context& ctx, const json& a) {
  auto now = std::chrono::system_clock::now();
  KeyValues kv;
  kv.add("ID", field(a, "ID"));
  kv.add("Name", field(a, "Name"));
  kv.add("Namespace", field(a, "Namespace"));
  kv.add("Node ID", field(a, "NodeID").empty() ? "<not placed>" : field(a, "NodeID"));
  kv.add("Desired Status", field(a, "DesiredStatus"));
  kv.add("Client Status", field(a, "ClientStatus"));
  json task = a.value("Task", json());
  if (task.is_object()) {
    std::string cmd = field(task, "Command");
    for (const auto& arg : task.value("Args", json::array())) {
      cmd += ' ';  // appended in two steps: GCC 12 -O3 -Wrestrict false positive on " " + string&&
      cmd += text(arg);
    }
    kv.add("Task", cmd);
  } else {
    kv.add("Task", "<none: holds its volumes until stopped>");
  }
  ctx.out() << kv.render();

  ctx.out() << "\nVolumes\n";
  Table vols({"Name", "Source", "Access Mode", "Attachment Mode", "Read Only"});
  json vs = a.value("Volumes", json::object());
  for (auto it = vs.begin(); it != vs.end(); ++it)
    vols.add_row({vs.is_object() ? it.key() : field(*it, "Name"), field(*it, "Source"), field(*it, "AccessMode"),
                  field(*it, "AttachmentMode"), field(*it, "ReadOnly")});
  ctx.out() << (vols.empty() ? std::string("None\n") : vols.render());

  json events = a.value("Events", json::array());
  if (events.is_array() && !events.empty()) {
    ctx.out() << "\nRecent Events\n";
    Table t({"Time", "Type", "Message"});
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      t.add_row({time_text(field(*it, "Time"), now), field(*it, "Type"), field(*it, "Message")});
    ctx.out() << t.render();
  }
}

int alloc_status(Context& ctx, const Invocation& inv) {
  if (!inv.args.empty()) {
    const auto id = resolve_alloc(ctx, inv.args[0]);
    if (!id) return kExitError;
    auto r = ctx.call("GET", alloc_path(*id));
    if (!r) return kExitError;
    if (ctx.json()) return ctx.print_json(r->body), kExitOk;
    print_alloc(ctx, r->body);
    return kExitOk;
  }
  std::string target = "/v1/allocations";
  if (auto n = inv.flag("node")) target += "?node_id=" + url_encode(*n);
  auto r = ctx.call("GET", target);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) {
    ctx.out() << "No allocations\n";
    return kExitOk;
  }
  ctx.out() << alloc_table(r->body, ctx.every_namespace());
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> alloc_commands() {
  return {
      {.words = {"alloc", "run"},
       .arguments = "FILE",
       .min_args = 1,
       .max_args = 1,
       .summary = "Submit an allocation from a JSON file",
       .help = "FILE holds the API's submit body {\"Allocation\":{...}} or one allocation object; \"-\" reads\n"
               "standard input. The task sees each volume's path in MOORING_VOLUME_<NAME>. See examples/alloc.json.",
       .run = alloc_run},
      {.words = {"alloc", "stop"},
       .arguments = "ID|NAME",
       .min_args = 1,
       .max_args = 1,
       .summary = "Stop an allocation; its volumes are released afterwards",
       .help = "Takes an allocation ID, a unique ID prefix, or the name of a running allocation.",
       .run = alloc_stop},
      {.words = {"alloc", "status"},
       .arguments = "[ID|NAME]",
       .min_args = 0,
       .max_args = 1,
       .flags = {{"node", true, "ID", "list only the allocations of this node"}},
       .summary = "List allocations, or show one with its volumes and events",
       .run = alloc_status},
  };
}

}  // namespace mooring::cli
