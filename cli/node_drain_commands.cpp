// `mooring node eligibility ID -enable|-disable` and `mooring node drain ID [-deadline D]
// [-ignore-system] [-disable [-keep-ineligible]]` (PUT /v1/node/:id/eligibility and /drain).
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

int node_eligibility(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  const bool enable = inv.enabled("enable"), disable = inv.enabled("disable");
  if (enable == disable) {
    ctx.err() << "Error: give exactly one of -enable and -disable\n";
    return kExitUsage;
  }
  auto r = ctx.call("PUT", "/v1/node/" + url_encode(id) + "/eligibility", json{{"Eligible", enable}});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Node \"" << id << "\" scheduling eligibility set: " << field(r->body, "SchedulingEligibility") << "\n";
  return kExitOk;
}

int node_drain(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  json body = json::object();
  const bool disable = inv.enabled("disable");
  if (disable) {
    body["Disable"] = true;
    body["MarkEligible"] = !inv.enabled("keep-ineligible");
  } else {
    if (auto d = inv.flag("deadline")) body["Deadline"] = *d;
    if (inv.enabled("ignore-system")) body["IgnoreSystemJobs"] = true;
  }
  auto r = ctx.call("PUT", "/v1/node/" + url_encode(id) + "/drain", body);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (disable) {
    ctx.out() << "Node \"" << id
              << "\" drain canceled; scheduling eligibility: " << field(r->body, "SchedulingEligibility") << "\n";
    return kExitOk;
  }
  const json strategy = r->body.value("DrainStrategy", json());
  ctx.out() << "Node \"" << id << "\" drain started: deadline " << field(strategy, "ForceDeadline")
            << "; `mooring node status " << id << "` shows its progress\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> node_drain_commands() {
  return {
      {.words = {"node", "eligibility"},
       .arguments = "ID",
       .min_args = 1,
       .max_args = 1,
       .flags = {{.name = "enable", .help = "the node takes new placements"},
                 {.name = "disable", .help = "the node takes no new placement; what runs there goes on"}},
       .summary = "Mark a node eligible or ineligible for new placements (node:write)",
       .help = "A draining node's eligibility is the drain's: cancel the drain first.",
       .run = node_eligibility},
      {.words = {"node", "drain"},
       .arguments = "ID",
       .min_args = 1,
       .max_args = 1,
       .flags = {{.name = "deadline",
                  .takes_value = true,
                  .value_name = "DURATION",
                  .help = "how long allocations not marked to migrate may run on (default 1h; 0: at once)"},
                 {.name = "ignore-system", .help = "leave the system allocations' copies on the node"},
                 {.name = "disable", .help = "cancel a running drain (the node becomes eligible again)"},
                 {.name = "keep-ineligible", .help = "with -disable: the node stays ineligible"}},
       .summary = "Drain a node: move its allocations off in the order that keeps volumes releasable",
       .help = "The node takes no new placement. Allocations marked Migrate get a replacement on another\n"
               "node at once, which claims each volume the moment the old claim is freed; the others run\n"
               "until the deadline, then stop. Plugin allocations stop last, once their volumes on the\n"
               "node are released. The node stays ineligible when the drain completes.",
       .run = node_drain},
  };
}

}  // namespace mooring::cli
