#include "services/nodeagent/controlplane/node_status.hpp"

#include <algorithm>

#include "shared/domain/time.hpp"

namespace mooring::nodeagent {

void NodeStatus::set_fingerprint(const ::mooring::v1::PluginFingerprint& fp) {
  auto& entry = fingerprints_[{fp.plugin_id(), fp.type(), fp.alloc_id()}];
  if (entry.order == 0) entry.order = next_order_++;
  entry.fp = fp;
  changed();
}

void NodeStatus::remove_fingerprint(const std::string& plugin_id) {
  if (std::erase_if(fingerprints_, [&](const auto& entry) { return std::get<0>(entry.first) == plugin_id; }) > 0)
    changed();
}

void NodeStatus::remove_fingerprint(const std::string& plugin_id, const std::string& alloc_id) {
  if (std::erase_if(fingerprints_, [&](const auto& entry) {
        return std::get<0>(entry.first) == plugin_id && std::get<2>(entry.first) == alloc_id;
      }) > 0)
    changed();
}

void NodeStatus::prefer(const std::string& plugin_id, const std::string& alloc_id) {
  bool any = false;
  for (auto& [key, entry] : fingerprints_) {
    if (std::get<0>(key) != plugin_id || std::get<2>(key) != alloc_id) continue;
    entry.order = next_order_++;
    any = true;
  }
  if (any) changed();
}

bool NodeStatus::preferred(const Fingerprint& a, const Fingerprint& b) {
  if (a.fp.healthy() != b.fp.healthy()) return a.fp.healthy();
  return a.order > b.order;
}

std::vector<::mooring::v1::PluginFingerprint> NodeStatus::fingerprints() const {
  std::map<std::pair<std::string, int>, const Fingerprint*> reported;  // one per (id, type)
  for (const auto& [key, entry] : fingerprints_) {
    auto& slot = reported[{std::get<0>(key), std::get<1>(key)}];
    if (!slot || preferred(entry, *slot)) slot = &entry;
  }
  std::vector<::mooring::v1::PluginFingerprint> out;
  out.reserve(reported.size());
  for (const auto& [id, entry] : reported) out.push_back(entry->fp);
  return out;
}

std::optional<::mooring::v1::PluginFingerprint> NodeStatus::fingerprint(const std::string& plugin_id,
                                                                        ::mooring::v1::PluginType serving) const {
  const Fingerprint* best = nullptr;
  for (const auto& [key, entry] : fingerprints_) {
    if (std::get<0>(key) != plugin_id) continue;
    const auto& fp = entry.fp;
    if (serving == ::mooring::v1::PLUGIN_TYPE_UNSPECIFIED || fp.type() == serving ||
        fp.type() == ::mooring::v1::PLUGIN_TYPE_MONOLITH) {
      if (!best || preferred(entry, *best)) best = &entry;
    }
  }
  if (!best) return std::nullopt;
  return best->fp;
}

std::optional<::mooring::v1::PluginFingerprint> NodeStatus::fingerprint(const std::string& plugin_id,
                                                                        ::mooring::v1::PluginType serving,
                                                                        const std::string& alloc_id) const {
  for (const auto& [key, entry] : fingerprints_) {
    if (std::get<0>(key) != plugin_id || std::get<2>(key) != alloc_id) continue;
    const auto& fp = entry.fp;
    if (serving == ::mooring::v1::PLUGIN_TYPE_UNSPECIFIED || fp.type() == serving ||
        fp.type() == ::mooring::v1::PLUGIN_TYPE_MONOLITH)
      return fp;
  }
  return std::nullopt;
}

uint64_t NodeStatus::add_event(std::string subsystem, std::string message, std::map<std::string, std::string> details) {
  ::mooring::v1::NodeEvent e;
  e.set_time_ms(domain::to_unix_ms(domain::now()));
  e.set_subsystem(std::move(subsystem));
  e.set_message(std::move(message));
  for (auto& [k, v] : details) (*e.mutable_details())[k] = std::move(v);
  const uint64_t seq = next_seq_++;
  events_.push_back({seq, std::move(e)});
  while (events_.size() > max_events_) {
    events_.pop_front();
    ++dropped_;
  }
  changed();
  return seq;
}

NodeStatus::Batch NodeStatus::pending_events() const {
  Batch b;
  if (dropped_ > 0 && !events_.empty()) {
    ::mooring::v1::NodeEvent note;
    note.set_time_ms(events_.front().event.time_ms());
    note.set_subsystem("agent");
    note.set_message(std::to_string(dropped_) + " events dropped while the control plane was unreachable");
    b.events.push_back(std::move(note));
  }
  for (const auto& e : events_) {
    b.events.push_back(e.event);
    b.last_seq = e.seq;
  }
  return b;
}

void NodeStatus::ack(uint64_t last_seq) {
  while (!events_.empty() && events_.front().seq <= last_seq) events_.pop_front();
  dropped_ = 0;
}

void NodeStatus::set_volume_stats(const std::vector<::mooring::v1::VolumeStats>& stats) {
  if (stats.empty()) return;
  for (const auto& s : stats) stats_[{s.volume_id(), s.alloc_id()}] = {next_stats_seq_++, s};
  changed();
}

NodeStatus::StatsBatch NodeStatus::pending_volume_stats() const {
  StatsBatch b;
  for (const auto& [key, entry] : stats_) {
    b.stats.push_back(entry.second);
    b.last_seq = std::max(b.last_seq, entry.first);
  }
  return b;
}

void NodeStatus::ack_volume_stats(uint64_t last_seq) {
  std::erase_if(stats_, [&](const auto& kv) { return kv.second.first <= last_seq; });
}

}  // namespace mooring::nodeagent
