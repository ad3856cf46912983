// API room: GET /v1/event/stream — the event log as one long-lived response of newline-delimited
// JSON in Nomad's shape: a line {"Index":N,"Events":[...]} per state index that has events the
// caller may see, and {} as a heartbeat when nothing was sent for a while. Only durable events go
// out (with group commit a failed flush takes its events back; a stream never shows those).
// The route itself (ACLs, namespace) is wired in api.cpp; this file is the stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "services/controlplane/http/message.hpp"
#include "shared/domain/event.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::api {

// The ?topic= parameters: "Volume" (every event of the topic), "Volume:vol-1" (one object's),
// "*" or "*:*" (everything). Repeatable; none means every topic.
class TopicFilter {
 public:
  // An unknown topic or an empty key is refused, naming the parameter.
  static domain::Expected<TopicFilter> parse(const std::vector<std::string>& values);
  bool matches(const domain::Event& e) const;

 private:
  std::vector<std::pair<std::string, std::string>> wanted_;  // (topic, key); "*" matches any
};

// Where a stream stands and what it lets through. Pure: tests feed it events directly.
class EventCursor {
 public:
  // `next`: the first index to send. `ns`: one namespace, or "*" (events about nodes and plugins,
  // which have none, pass either way). `visible`: what the caller's ACL lets it read.
  EventCursor(std::uint64_t next, TopicFilter topics, std::string ns,
              std::function<bool(const domain::Event&)> visible);

  // The lines for the events with next <= Index <= up_to that pass the filters, at most
  // `max_events` events (whole indexes only, unless one index alone is larger); moves next past
  // what it looked at. `events` is the store's log, oldest first.
  std::string take(const std::deque<domain::Event>& events, std::uint64_t up_to, std::size_t max_events);
  std::uint64_t next() const { return next_; }

 private:
  std::uint64_t next_;
  TopicFilter topics_;
  std::string ns_;
  std::function<bool(const domain::Event&)> visible_;
};

struct EventStreamOptions {
  std::chrono::milliseconds heartbeat{10'000};  // Nomad's interval
  std::size_t max_events_per_piece = 512;
};

// The streamed response (application/x-ndjson). `recheck` runs before every piece: a message
// (the token was deleted, expired, ...) is sent as {"Error":"..."} and ends the stream. The stream
// also ends when the store releases its waiters (shutdown).
http::Response open_event_stream(StateStore& store, EventCursor cursor, EventStreamOptions options,
                                 std::function<std::optional<std::string>()> recheck);

}  // namespace mooring::controlplane::api
