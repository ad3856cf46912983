// What this node reports to the control plane: the latest fingerprint of every plugin, the
// node events not yet acknowledged and the volume stats polled since the last acknowledged
// heartbeat (the latest per volume and allocation). Events are numbered; the control plane link sends those after
// the last acknowledged number, so a failed heartbeat loses nothing. The buffer is bounded: when
// the control plane is away for long, the oldest events are dropped and one "events dropped"
// event says how many.
//
// Not thread-safe: used from the agent's executor.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "mooring/v1/types.pb.h"

namespace mooring::nodeagent {

class NodeStatus {
 public:
  explicit NodeStatus(size_t max_events = 1000) : max_events_(max_events) {}

  // Fingerprints are kept per plugin id, type and allocation: a plugin split into a controller and
  // a node instance on this node reports two, and two allocations running one plugin id (an
  // upgrade step) each keep their own. What is reported is one per (id, type), as the control
  // plane expects: a healthy instance over an unhealthy one, then the one set first most recently
  // (the newer instance).
  void set_fingerprint(const ::mooring::v1::PluginFingerprint& fp);
  void remove_fingerprint(const std::string& plugin_id);                               // every instance of the id
  void remove_fingerprint(const std::string& plugin_id, const std::string& alloc_id);  // that allocation's
  // That allocation's instance counts as set most recently: the registry serves it again (a
  // fallback, or the newer instance after an agent restart re-adopted an older one last).
  void prefer(const std::string& plugin_id, const std::string& alloc_id);
  std::vector<::mooring::v1::PluginFingerprint> fingerprints() const;
  // The fingerprint of the instance of `plugin_id` that serves `serving` (PLUGIN_TYPE_CONTROLLER
  // or PLUGIN_TYPE_NODE: that instance, or a monolith); UNSPECIFIED: any instance of the id.
  std::optional<::mooring::v1::PluginFingerprint> fingerprint(
      const std::string& plugin_id, ::mooring::v1::PluginType serving = ::mooring::v1::PLUGIN_TYPE_UNSPECIFIED) const;
  // The same, of the instance run by `alloc_id` only ("" for a configured plugin).
  std::optional<::mooring::v1::PluginFingerprint> fingerprint(const std::string& plugin_id,
                                                              ::mooring::v1::PluginType serving,
                                                              const std::string& alloc_id) const;

  // Records an event (time = now) and returns its sequence number.
  uint64_t add_event(std::string subsystem, std::string message, std::map<std::string, std::string> details = {});

  struct Batch {
    std::vector<::mooring::v1::NodeEvent> events;
    uint64_t last_seq = 0;  // pass to ack() once the control plane accepted the batch
  };
  // Events not yet acknowledged (oldest first).
  Batch pending_events() const;
  void ack(uint64_t last_seq);
  size_t pending_count() const { return events_.size(); }

  // Volume stats to send: each replaces the pending one of its (volume, allocation).
  void set_volume_stats(const std::vector<::mooring::v1::VolumeStats>& stats);
  struct StatsBatch {
    std::vector<::mooring::v1::VolumeStats> stats;
    uint64_t last_seq = 0;  // pass to ack_volume_stats() once the control plane accepted them
  };
  StatsBatch pending_volume_stats() const;
  // Drops what was sent, unless a newer poll replaced it meanwhile.
  void ack_volume_stats(uint64_t last_seq);

  // Called after every change (fingerprint or event), e.g. to send a heartbeat early.
  void on_change(std::function<void()> fn) { on_change_ = std::move(fn); }

 private:
  void changed() {
    if (on_change_) on_change_();
  }
  struct Entry {
    uint64_t seq;
    ::mooring::v1::NodeEvent event;
  };
  size_t max_events_;
  struct Fingerprint {
    uint64_t order = 0;  // when this instance was first set: higher is newer
    ::mooring::v1::PluginFingerprint fp;
  };
  // The reported one of two fingerprints of one (id, type): true when `a` wins over `b`.
  static bool preferred(const Fingerprint& a, const Fingerprint& b);
  std::map<std::tuple<std::string, int, std::string>, Fingerprint> fingerprints_;  // (id, type, alloc)
  uint64_t next_order_ = 1;
  std::deque<Entry> events_;
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, ::mooring::v1::VolumeStats>>
      stats_;  // (volume, alloc)
  uint64_t next_stats_seq_ = 1;
  uint64_t next_seq_ = 1;
  uint64_t dropped_ = 0;
  std::function<void()> on_change_;
};

}  // namespace mooring::nodeagent
