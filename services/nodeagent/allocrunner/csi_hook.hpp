// The CSI hook (Nomad's csi_hook, seeds 000 and 004). Prerun, per volume request of the
// allocation: a volume a previous agent mounted and that is still mounted is kept (no new claim);
// otherwise the volume is claimed from the control plane and mounted through the volume manager.
// A claim refused because another allocation still holds the volume ("volume max claims
// reached": FAILED_PRECONDITION / RESOURCE_EXHAUSTED) or failing for transport reasons is retried
// with backoff 1 s -> 1 min for `claim_backoff.max_elapsed` (default 24 h, Nomad's number: long
// enough for an operator to repair a stuck plugin or release, and a stop request ends the wait at
// once); NOT_FOUND, INVALID_ARGUMENT and the other "fix the request" codes are final and fail the
// allocation. Postrun returns at once: every volume claimed (or possibly claimed) is handed to
// the volume manager's detached release, which unmounts and then tells the control plane.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/alloc_hook.hpp"
#include "shared/async/backoff.hpp"
#include "shared/async/retry.hpp"
#include "shared/domain/allocation.hpp"

namespace grpc {
class Status;
}

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

class ControlPlaneCalls;
class VolumeMounter;

struct CsiHookOptions {
  std::string node_id;
  async::Backoff claim_backoff{std::chrono::seconds(1), std::chrono::seconds(60), 2.0, 0.2, std::chrono::hours(24)};
  // A mount that failed for a reason worth retrying (plugin restarting, timeout).
  async::Backoff mount_backoff{std::chrono::seconds(1), std::chrono::seconds(30), 2.0, 0.2, std::chrono::minutes(5)};
  // Notified when the control plane answers again after failures: a claim refused meanwhile
  // (no leader) is sent again then, not when its backoff ends. Not owned; may be null.
  async::WakeSignal* controlplane_back = nullptr;
  // The task's group, which its writable volumes are mounted for (task_walls.hpp's
  // volume_group_for); none for root, plugin tasks, or a node without walls.
  std::optional<uint32_t> volume_group;
};

// retry: the claim may succeed later (held by another allocation, control plane unreachable);
// stop: the request itself is wrong, retrying as-is cannot help. Pure, for tests.
async::Step classify_claim_status(const grpc::Status& status);

// type ("Claimed", "Mounted", "ClaimWaiting", ...) and message of a task event.
using AllocEventSink = std::function<void(std::string type, std::string message)>;

class CsiHook final : public AllocHook {
 public:
  // `claimed` are the volume ids an earlier run of this allocation claimed (from its state);
  // `note_claim` is awaited before each claim is sent so the caller can persist the id first.
  CsiHook(domain::Allocation alloc, ControlPlaneCalls& controlplane, VolumeMounter& mounter, CsiHookOptions options,
          AllocEventSink events, std::vector<std::string> claimed = {},
          std::function<boost::asio::awaitable<void>(const std::string&)> note_claim = {});

  std::string_view name() const override { return "csi"; }
  boost::asio::awaitable<domain::Status> prerun(std::map<std::string, std::string>& task_env) override;
  void postrun() override;

  // Volume ids Postrun releases: every volume a claim was sent for. Releasing a claim the control
  // plane never recorded is a no-op there, while a claim whose answer was lost (timeout) may well
  // be recorded, so every attempted claim is released.
  std::vector<std::string> claimed() const { return {claimed_.begin(), claimed_.end()}; }
  // volume id -> published path, after Prerun.
  const std::map<std::string, std::string>& paths() const { return paths_; }

 private:
  boost::asio::awaitable<domain::Expected<std::string>> claim_and_mount(const domain::VolumeRequest& request,
                                                                        const std::string& volume_id);

  domain::Allocation alloc_;
  ControlPlaneCalls& controlplane_;
  VolumeMounter& mounter_;
  CsiHookOptions options_;
  AllocEventSink events_;
  std::set<std::string> claimed_;
  std::function<boost::asio::awaitable<void>(const std::string&)> note_claim_;
  std::map<std::string, std::string> paths_;
  bool released_ = false;
};

}  // namespace mooring::nodeagent
