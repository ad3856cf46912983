#include "services/controlplane/api/event_stream.hpp"

#include <algorithm>
#include <memory>

#include <nlohmann/json.hpp>

#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane::api {

namespace {

constexpr std::string_view kTopics[] = {"Volume", "Claim", "Allocation", "Node", "Plugin", "Namespace"};

// One stream's state, shared by the response's next-piece function.
struct StreamState {
  StateStore& store;
  EventCursor cursor;
  EventStreamOptions options;
  std::function<std::optional<std::string>()> recheck;
  std::chrono::steady_clock::time_point heartbeat_due;
  bool ended = false;

  boost::asio::awaitable<std::optional<std::string>> next() {
    for (;;) {
      if (ended || store.released()) co_return std::nullopt;
      if (auto refusal = recheck()) {
        ended = true;
        co_return nlohmann::json{{"Error", *refusal}}.dump() + "\n";
      }
      auto lines = cursor.take(store.events(), store.durable_index(), options.max_events_per_piece);
      const auto now = std::chrono::steady_clock::now();
      if (!lines.empty() || now >= heartbeat_due) {
        heartbeat_due = now + options.heartbeat;
        co_return lines.empty() ? std::string("{}\n") : std::move(lines);
      }
      // Everything up to next()-1 was looked at: wake for a later event or the heartbeat.
      co_await store.wait_for_change(Table::events, cursor.next() - 1, heartbeat_due - now);
    }
  }
};

}  // namespace

domain::Expected<TopicFilter> TopicFilter::parse(const std::vector<std::string>& values) {
  TopicFilter f;
  for (const auto& v : values) {
    const auto colon = v.find(':');
    std::string topic = v.substr(0, colon);
    std::string key = colon == std::string::npos ? "*" : v.substr(colon + 1);
    const bool known = topic == "*" || std::find(std::begin(kTopics), std::end(kTopics), topic) != std::end(kTopics);
    if (!known)
      return domain::error("query parameter \"topic\": unknown topic \"" + topic +
                           "\" (Volume, Claim, Allocation, Node, Plugin, Namespace or *)");
    if (key.empty())
      return domain::error("query parameter \"topic\": \"" + v + "\" has an empty key (use Topic or Topic:ID)");
    f.wanted_.emplace_back(std::move(topic), std::move(key));
  }
  return f;
}

bool TopicFilter::matches(const domain::Event& e) const {
  if (wanted_.empty()) return true;
  return std::any_of(wanted_.begin(), wanted_.end(), [&](const auto& w) {
    return (w.first == "*" || w.first == e.topic) && (w.second == "*" || w.second == e.key);
  });
}

EventCursor::EventCursor(std::uint64_t next, TopicFilter topics, std::string ns,
                         std::function<bool(const domain::Event&)> visible)
    : next_(std::max<std::uint64_t>(next, 1)),
      topics_(std::move(topics)),
      ns_(std::move(ns)),
      visible_(std::move(visible)) {}

std::string EventCursor::take(const std::deque<domain::Event>& events, std::uint64_t up_to, std::size_t max_events) {
  std::string out;
  if (up_to < next_) return out;
  auto it = std::lower_bound(events.begin(), events.end(), next_,
                             [](const domain::Event& e, std::uint64_t i) { return e.index < i; });
  std::size_t taken = 0;
  nlohmann::json line;
  std::uint64_t line_index = 0;
  auto flush = [&] {
    if (line_index == 0) return;
    out += nlohmann::json{{"Index", line_index}, {"Events", std::move(line)}}.dump() + "\n";
    line = nlohmann::json();
    line_index = 0;
  };
  for (; it != events.end() && it->index <= up_to; ++it) {
    // Stop between indexes once the piece is full; the rest comes with the next piece.
    if (taken >= max_events && it->index != line_index) {
      flush();
      next_ = it->index;
      return out;
    }
    if (!topics_.matches(*it)) continue;
    if (ns_ != "*" && !it->ns.empty() && it->ns != ns_) continue;
    if (!visible_(*it)) continue;
    if (it->index != line_index) {
      flush();
      line_index = it->index;
      line = nlohmann::json::array();
    }
    line.push_back(domain::to_api_json(*it));
    ++taken;
  }
  flush();
  next_ = up_to + 1;
  return out;
}

http::Response open_event_stream(StateStore& store, EventCursor cursor, EventStreamOptions options,
                                 std::function<std::optional<std::string>()> recheck) {
  auto state = std::make_shared<StreamState>(StreamState{store, std::move(cursor), options, std::move(recheck),
                                                         std::chrono::steady_clock::now() + options.heartbeat});
  http::Response res;
  res.content_type = "application/x-ndjson";
  res.index = std::max<std::uint64_t>(1, store.durable_index());
  // Proxies must pass each line on as it comes.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.stream = [state] { return state->next(); };
  return res;
}

}  // namespace mooring::controlplane::api
