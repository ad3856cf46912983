#include "services/nodeagent/allocrunner/status_reporter.hpp"

#include <nlohmann/json.hpp>

#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

const log::Logger kLog{"alloc-status"};

}  // namespace

StatusReporter::StatusReporter(asio::any_io_executor ex, ControlPlaneCalls& controlplane, StatusReporterOptions options)
    : ex_(ex),
      controlplane_(controlplane),
      options_(std::move(options)),
      wake_(std::make_unique<async::WakeSignal>(ex)) {}

StatusReporter::~StatusReporter() {
  if (dirty_) save(true);  // whoever ran write-behind writes may be gone already
}

void StatusReporter::save_if_dirty() {
  if (!dirty_) return;
  dirty_ = false;
  save();
}

void StatusReporter::load() {
  if (options_.state_file.empty()) return;
  std::error_code ec;
  const auto text = durable::read_durable(options_.state_file, ec);
  if (!text) {
    if (ec) kLog.error("cannot read pending status reports", {{"error", ec.message()}});
    return;
  }
  try {
    const auto all = json::parse(*text);
    for (const auto& [alloc_id, j] : all.items()) {
      const auto status = domain::parse_client_status(j.at("status").get<std::string>());
      if (!status) continue;
      Entry e;
      e.status = *status;
      e.version = next_version_++;
      for (const auto& ev : j.value("events", json::array()))
        e.events.push_back({domain::from_unix_ms(ev.at("time_ms").get<int64_t>()), ev.at("type").get<std::string>(),
                            ev.at("message").get<std::string>()});
      pending_[alloc_id] = std::move(e);
    }
  } catch (const json::exception& e) {
    kLog.error("pending status reports unreadable; ignored", {{"error", e.what()}});
  }
}

void StatusReporter::save(bool on_this_thread) const {
  if (options_.state_file.empty()) return;
  json j = json::object();
  for (const auto& [alloc_id, e] : pending_) {
    json events = json::array();
    for (const auto& ev : e.events)
      events.push_back({{"time_ms", domain::to_unix_ms(ev.time)}, {"type", ev.type}, {"message", ev.message}});
    j[alloc_id] = {{"status", std::string(domain::to_string(e.status))}, {"events", std::move(events)}};
  }
  auto write = [file = options_.state_file, text = j.dump()] {
    if (const auto ec = durable::write_durable(file, text))
      kLog.error("cannot persist pending status reports", {{"error", ec.message()}});
  };
  if (write_behind_ && !on_this_thread) {
    write_behind_(std::move(write));
  } else {
    write();
  }
}

void StatusReporter::report(const std::string& alloc_id, domain::ClientStatus status,
                            std::vector<domain::TaskEvent> events) {
  auto& e = pending_[alloc_id];
  e.status = status;
  e.version = next_version_++;
  for (auto& ev : events) e.events.push_back(std::move(ev));
  if (e.events.size() > options_.max_events_per_alloc) {
    const auto drop = e.events.size() - options_.max_events_per_alloc + 1;
    e.events.erase(e.events.begin(), e.events.begin() + static_cast<std::ptrdiff_t>(drop));
    e.events.push_front({domain::now(), "EventsDropped",
                         std::to_string(drop) + " older events were dropped while the control plane was unreachable"});
  }
  // Written to disk with the batch (flush saves before it sends), not once per event: a
  // lifecycle reports about ten events, and every synchronous write contends with the mounts'.
  // A crash can lose at most the events of the last batch window; the allocation's status itself
  // is in its own state file and is reported again after a restart. While sends fail there is no
  // next batch to ride (the loop sleeps out its backoff), so a report is written at once.
  dirty_ = true;
  if (failing_) save_if_dirty();
  wake_->notify();
}

asio::awaitable<bool> StatusReporter::flush() {
  save_if_dirty();
  if (pending_.empty()) co_return true;
  if (before_send_) co_await before_send_();
  ::mooring::v1::UpdateAllocationsRequest req;
  req.set_node_id(options_.node_id);
  std::map<std::string, std::pair<std::uint64_t, std::size_t>> sent;  // alloc -> (version, events sent)
  for (const auto& [alloc_id, e] : pending_) {
    auto* u = req.add_updates();
    u->set_alloc_id(alloc_id);
    u->set_client_status(domain::to_proto(e.status));
    for (const auto& ev : e.events) *u->add_events() = domain::to_proto(ev);
    sent[alloc_id] = {e.version, e.events.size()};
  }
  const auto st = co_await controlplane_.update_allocations(req);
  if (!st.ok()) {
    kLog.debug("status update not delivered", {{"error", st.error_message()}});
    co_return false;
  }
  ++delivered_;
  // What arrived while the call was in flight stays pending.
  for (const auto& [alloc_id, what] : sent) {
    auto it = pending_.find(alloc_id);
    if (it == pending_.end()) continue;
    if (it->second.version == what.first) {
      pending_.erase(it);
    } else {
      auto& events = it->second.events;
      events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(std::min(what.second, events.size())));
    }
  }
  dirty_ = false;
  save();
  co_return pending_.empty();
}

asio::awaitable<void> StatusReporter::run() {
  unsigned failures = 0;
  while (true) {
    const auto gen = wake_->generation();
    if (pending_.empty()) {
      const auto slept = co_await async::sleep_for(std::chrono::hours(24), wake_.get(), gen);
      if (slept == async::SleepEnd::cancelled) co_return;
      continue;
    }
    const auto batched = co_await async::sleep_for(options_.batch_window);
    if (batched == async::SleepEnd::cancelled) co_return;
    // Success is the call going through, not "nothing pending afterwards": reports that arrived
    // while it was in flight go out with the next batch, not after a failure backoff (that
    // mistake held every busy allocation's "running" back by about 400 ms).
    const auto batches = delivered_;
    // Read before the attempt: a reconnect noticed while it is in flight must still wake the wait.
    const auto back_gen = options_.controlplane_back ? options_.controlplane_back->generation() : 0;
    co_await flush();
    failing_ = delivered_ == batches;
    if (!failing_) {
      failures = 0;
      continue;
    }
    const auto delay = options_.backoff.delay(failures++);
    if (failures == 1 || failures % 10 == 0)
      kLog.warn("allocation status not delivered; retrying",
                {{"pending", static_cast<int64_t>(pending_.size())}, {"delay", delay}});
    const auto slept = co_await async::sleep_for(delay, options_.controlplane_back, back_gen);
    if (slept == async::SleepEnd::cancelled) co_return;
  }
}

}  // namespace mooring::nodeagent
