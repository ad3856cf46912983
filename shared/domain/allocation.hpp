// Domain: an allocation (a workload placed on a node) with its volume requests and optional
// task, plus the rules for how a request names its volume and how the task sees its path.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"
#include "shared/domain/volume.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::domain {

struct VolumeRequest {
  std::string name;  // key in Allocation::volumes
  std::string type = "csi";
  std::string source;  // volume id; with per_alloc the base id, claimed as "base[N]"
  bool read_only = false;
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;
  bool per_alloc = false;
  MountOptions mount_options;
  bool operator==(const VolumeRequest&) const = default;
};

// A task that is a CSI plugin (Nomad's csi_plugin block): the agent gives it a socket directory
// and CSI_ENDPOINT, supervises it like a configured plugin and registers the instance in its
// dynamic registry, owned by the allocation.
struct TaskCSIPlugin {
  std::string id;  // the plugin id volumes name
  PluginType type = PluginType::monolith;
  std::string mount_dir = "csi";                      // the socket's directory, relative to the task's dir
  Duration health_timeout{std::chrono::seconds(30)};  // not healthy by then: the allocation fails
  std::string stage_publish_base_dir;                 // empty: the agent's default
  bool operator==(const TaskCSIPlugin&) const = default;
};

// What a task may use on its node, enforced with the node's cgroups. 0: no limit.
struct TaskResources {
  int cpu = 0;        // millicores: 1000 is one core's worth of time per period
  int memory_mb = 0;  // over this the kernel's OOM killer ends the task ("OOM killed")
  bool operator==(const TaskResources&) const = default;
};

struct Task {
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  Duration kill_timeout{0};  // 0 = the agent's default
  // Injected into the task like env, but never returned by the API (key names only), logged or
  // put in an event; sealed at rest, and sent only to the node the allocation is placed on.
  std::map<std::string, std::string> secret_env;
  std::optional<TaskCSIPlugin> csi_plugin;  // set: the task is a CSI plugin
  // Who the task runs as: a user name, "uid" or "uid:gid" (task_user.hpp); empty: the node's
  // task_user (nobody by default). Root only on nodes that allow it.
  std::string user;
  TaskResources resources;
  bool operator==(const Task&) const = default;
};

struct TaskEvent {
  Time time{};
  std::string type;  // "Received", "Claimed", "Mounted", "Started", "Terminated", ...
  std::string message;
  bool operator==(const TaskEvent&) const = default;
};

// A system group's bookkeeping for one node (durable, in the group's record): how often its copy
// was replaced and when the next replacement may start, so a control plane restart does not reset
// the backoff to zero.
struct SystemNodeState {
  int restarts = 0;      // copies replaced on this node after they ended
  Duration backoff{0};   // the wait before the next replacement (0: none yet)
  Time next_restart{};   // unset: a missing copy is placed at once
  Time copy_created{};   // when the current copy was placed (a copy that ran 5 min resets the backoff)
  bool stopped = false;  // its copy was stopped on purpose: not replaced while the group runs
  std::string message;   // why the node has no copy (placement refused it), or ""
  bool operator==(const SystemNodeState&) const = default;
};

// One node of a rolling update: pending -> starting (new copy beside the old) -> healthy (the
// node's plugin instance reports the new copy healthy) -> done (old copy stopped); or failed.
struct RolloutNode {
  std::string node_id;
  std::string state = "pending";  // pending|starting|healthy|done|failed
  std::string message;
  std::string old_alloc_id;
  std::string new_alloc_id;
  Time started{};  // the new copy was placed: its health deadline counts from here
  bool operator==(const RolloutNode&) const = default;
};

struct Rollout {
  std::uint64_t version = 0;       // the allocation's ModifyIndex when the update was accepted
  std::string status = "running";  // running|done|failed
  std::vector<RolloutNode> nodes;  // in node id order, rolled one at a time
  bool operator==(const Rollout&) const = default;
};

struct Allocation {
  std::string ns{kDefaultNamespace};  // its volume requests name volumes of this namespace
  std::string id;                     // a fresh UUID: unique across namespaces
  std::string name;
  std::string node_id;
  DesiredStatus desired_status = DesiredStatus::run;
  ClientStatus client_status = ClientStatus::pending;
  std::map<std::string, VolumeRequest> volumes;  // request name -> request
  std::optional<Task> task;                      // absent: the allocation only holds its volumes
  Duration stop_after_client_disconnect{0};      // 0 = never
  int index = 0;                                 // the N of per_alloc sources
  // A system allocation is a group: one copy (an allocation with system_id = the group's id) on
  // every ready node whose name or meta matches node_selector, including nodes that join later.
  // The group itself has no node and runs nothing.
  bool system = false;
  std::map<std::string, std::string> node_selector;     // "name glob" or meta key -> value
  std::string system_id;                                // set on a copy: its group's id
  std::map<std::string, SystemNodeState> system_nodes;  // on a group: node id -> its bookkeeping
  std::optional<Rollout> rollout;                       // the last rolling update of a plugin task
  // Moved when its node is drained: a replacement is placed on another eligible node at once and
  // claims the volumes as the old claims are freed (scheduler/drain_rules.hpp).
  bool migrate = false;
  std::string migrated_from;  // on a replacement: the allocation it replaced
  std::vector<TaskEvent> events;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Allocation&) const = default;
};

// The volume id a request claims: source, or "source[index]" when per_alloc.
std::string claimed_volume_id(const VolumeRequest& request, int alloc_index);
// The key (ids.hpp) of the volume a request claims: in the allocation's namespace.
std::string claimed_volume_key(const Allocation& alloc, const VolumeRequest& request);

// MOORING_VOLUME_<NAME>: the name upper-cased, every character outside [A-Z0-9_] becomes '_'.
std::string volume_env_var(std::string_view request_name);

// The claim mode a request takes: read when read_only or the access mode is reader-only.
ClaimMode claim_mode(const VolumeRequest& request);

// Terminal: the client finished (complete, failed or lost). A stopped allocation that still
// runs is not terminal until its node says so: its volumes may still be mounted.
bool is_terminal(const Allocation& alloc);

}  // namespace mooring::domain
