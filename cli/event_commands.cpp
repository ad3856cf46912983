// `mooring events`: the control plane's event log, optionally waiting for new events (a
// blocking query: ?index=N&wait=D answers when something after N happened or D passed).
// `mooring event stream`: the same events as they happen, over GET /v1/event/stream.
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
    t.add_row({field(e, "Index"), field(e, "Time"), field(e, "Topic"), field(e, "Type"), field(e, "Key"),
               field(e, "Message")});
  ctx.out() << t.render();
  return kExitOk;
}

// Follows the event stream until the control plane ends it (shutdown) or the user interrupts.
int stream(Context& ctx, const Invocation& inv) {
  std::string target = "/v1/event/stream";
  char sep = '?';
  if (auto i = inv.flag("index")) {
    if (i->empty() || i->find_first_not_of("0123456789") != std::string::npos)
      return ctx.fail("-index: expected a non-negative integer, got \"" + *i + "\"");
    target += sep + std::string("index=") + *i;
    sep = '&';
  }
  if (auto topics = inv.flag("topic")) {
    for (std::size_t start = 0; start <= topics->size();) {
      auto comma = topics->find(',', start);
      if (comma == std::string::npos) comma = topics->size();
      target += sep + std::string("topic=") + url_encode(topics->substr(start, comma - start));
      sep = '&';
      start = comma + 1;
    }
  }
  std::string refused;
  const int rc = ctx.stream_lines(
      target,
      [&](std::string_view line) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || j.empty()) return;  // a heartbeat
        if (j.contains("Error")) {
          refused = field(j, "Error");
          return;
        }
        if (ctx.json()) {
          ctx.out() << line << std::endl;  // flushed: the reader may be a pipe
          return;
        }
        for (const auto& e : j.value("Events", nlohmann::json::array()))
          ctx.out() << field(e, "Index") << "  " << field(e, "Time") << "  " << field(e, "Topic") << "  "
                    << field(e, "Type") << "  " << field(e, "Key") << "  " << field(e, "Message") << std::endl;
      },
      std::chrono::seconds(35));  // three missed heartbeats
  if (!refused.empty()) return ctx.fail("the control plane ended the stream: " + refused);
  return rc;
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
           .run = events},
          {.words = {"event", "stream"},
           .arguments = "",
           .min_args = 0,
           .max_args = 0,
           .flags = {{"index", true, "N",
                      "start at index N (the oldest kept event when N is older); default: new events only"},
                     {"topic", true, "TOPIC[:ID]",
                      "only this topic, or one object of it (repeatable; Volume, Claim, Allocation, Node, Plugin, *)",
                      true}},
           .summary = "Follow events as they happen (one line each; -json: the stream's lines)",
           .help = "Streams GET /v1/event/stream until the control plane ends it or you interrupt. To resume, pass\n"
                   "-index with the last Index seen plus one.",
           .run = stream}};
}

}  // namespace mooring::cli
