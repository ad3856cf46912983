// `mooring events`: the control plane's event log, optionally waiting for new events (a
// blocking query: ?index=N&wait=D answers when something after N happened or D passed).
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

int events(Context& ctx, const Invocation& inv) {
  std::uint64_t index = 0;
  if (auto i = inv.flag("index")) {
    try {
      std::size_t used = 0;
      index = std::stoull(*i, &used);
      if (used != i->size() || i->starts_with("-")) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return ctx.fail("-index: expected a non-negative integer, got \"" + *i + "\"");
    }
  }
  std::optional<std::chrono::milliseconds> wait;
  if (auto w = inv.flag("wait")) {
    wait = parse_duration(*w);
    if (!wait) return ctx.fail("-wait: expected a duration like 30s or 5m, got \"" + *w + "\"");
  }
  std::string filter;
  if (auto t = inv.flag("topic")) filter += "&topic=" + url_encode(*t);
  if (auto k = inv.flag("key")) filter += "&key=" + url_encode(*k);

  // -wait without -index means "from now on": the current index comes from the list's header.
  if (wait && index == 0) {
    auto head = ctx.call("GET", "/v1/events?per_page=1");
    if (!head) return kExitError;
    index = head->index;
  }
  std::string target = "/v1/events?index=" + std::to_string(index) + filter;
  CallOptions options;
  if (wait) {
    target += "&wait=" + std::to_string(wait->count()) + "ms";
    // The server adds up to wait/16 of jitter; leave room for it and a slow answer.
    options.timeout = *wait + *wait / 8 + std::chrono::seconds(30);
  }
  auto r = ctx.call("GET", target, std::nullopt, options);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) {
    ctx.out() << "No events" << (index > 0 ? " after index " + std::to_string(index) : std::string()) << "\n";
    return kExitOk;
  }
  Table t({"Index", "Time", "Topic", "Type", "Key", "Message"});
  for (const auto& e : r->body)
    t.add_row({field(e, "Index"), field(e, "Time"), field(e, "Topic"), field(e, "Type"), field(e, "Key"), field(e, "Message")});
  ctx.out() << t.render();
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> event_commands() {
  return {{.words = {"events"},
           .arguments = "",
           .min_args = 0,
           .max_args = 0,
           .flags = {{"index", true, "N", "only events after index N (with -wait: block until there is one)"},
                     {"wait", true, "DURATION", "block up to DURATION for new events (10s, 5m)"},
                     {"topic", true, "TOPIC", "only this topic (Volume, Allocation, Node, Plugin)"},
                     {"key", true, "ID", "only events about this object"}},
           .summary = "Show the event log, or wait for new events",
           .run = events}};
}

}  // namespace mooring::cli
