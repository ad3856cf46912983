#include "services/nodeagent/allocrunner/csi_hook.hpp"

#include <grpcpp/support/status.h>

#include "services/nodeagent/allocrunner/volume_mounter.hpp"
#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;

const log::Logger kLog{"csi-hook"};

}  // namespace

async::Step classify_claim_status(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return async::Step::done;
    // Held by another allocation (max claims reached), or a plugin/controller not ready yet.
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    // The control plane is unreachable, busy or failed for its own reasons: not about the request.
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN: return async::Step::retry;
    default:  // NOT_FOUND, INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, ALREADY_EXISTS, ...
      return async::Step::stop;
  }
}

CsiHook::CsiHook(domain::Allocation alloc, ControlPlaneCalls& controlplane, VolumeMounter& mounter,
                 CsiHookOptions options, AllocEventSink events, std::vector<std::string> claimed,
                 std::function<asio::awaitable<void>(const std::string&)> note_claim)
    : alloc_(std::move(alloc)),
      controlplane_(controlplane),
      mounter_(mounter),
      options_(std::move(options)),
      events_(std::move(events)),
      claimed_(claimed.begin(), claimed.end()),
      note_claim_(std::move(note_claim)) {}

asio::awaitable<domain::Status> CsiHook::prerun(std::map<std::string, std::string>& task_env) {
  std::map<std::string, RestoredVolume> restored;
  for (auto& r : mounter_.restore(alloc_.id)) restored.emplace(r.volume_id, std::move(r));

  for (const auto& [name, request] : alloc_.volumes) {
    if (request.type != "csi") continue;
    const auto volume_id = domain::claimed_volume_key(alloc_, request);  // "ns:id" outside the default namespace
    std::string path;
    if (auto it = restored.find(volume_id); it != restored.end() && it->second.mounted) {
      // Mounted by this allocation before the agent restarted: keep it, no new claim.
      path = it->second.path;
      claimed_.insert(volume_id);
      events_("Restored", "volume " + volume_id + " is still mounted at " + path);
    } else {
      if (it != restored.end()) {
        events_("Remounting", "volume " + volume_id + " must be mounted again: " + it->second.reason);
      }
      auto mounted = co_await claim_and_mount(request, volume_id);
      if (!mounted) co_return domain::error(mounted.error());
      path = std::move(*mounted);
    }
    paths_[volume_id] = path;
    task_env[domain::volume_env_var(name)] = path;
  }
  co_return domain::Status{};
}

asio::awaitable<domain::Expected<std::string>> CsiHook::claim_and_mount(const domain::VolumeRequest& request,
                                                                        const std::string& volume_id) {
  v1::ClaimVolumeRequest claim;
  claim.set_volume_id(volume_id);
  claim.set_alloc_id(alloc_.id);
  claim.set_node_id(options_.node_id);
  claim.set_mode(domain::to_proto(domain::claim_mode(request)));
  claim.set_access_mode(domain::to_proto(request.access_mode));
  claim.set_attachment_mode(domain::to_proto(request.attachment_mode));
  v1::ClaimVolumeResponse answer;

  // Recorded before the first claim is sent: a restart in the middle must still release it.
  if (!claimed_.contains(volume_id)) {
    if (note_claim_) co_await note_claim_(volume_id);
    claimed_.insert(volume_id);
  }

  std::string last_wait_error;
  async::RetryOptions claim_retry;
  claim_retry.backoff = options_.claim_backoff;
  claim_retry.wake = options_.controlplane_back;
  claim_retry.on_retry = [&](const async::RetryEvent& e) {
    // One event per distinct reason, not one per attempt: a 24 h wait must not flood the events.
    if (e.error != last_wait_error) {
      last_wait_error = e.error;
      events_("ClaimWaiting", "claim of volume " + volume_id + " not granted yet, retrying: " + e.error);
    }
    kLog.info("claim not granted; retrying", {{"alloc", alloc_.id},
                                              {"volume", volume_id},
                                              {"attempt", static_cast<int64_t>(e.attempt)},
                                              {"delay", e.delay},
                                              {"error", e.error}});
  };
  const auto claimed = co_await async::retry(
      [&](unsigned) -> asio::awaitable<async::Attempt> {
        answer.Clear();
        const auto st = co_await controlplane_.claim_volume(claim, answer);
        // The node's limit refused the ControllerPublish: the limits are read again before the retry.
        if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) mounter_.limits_exhausted();
        switch (classify_claim_status(st)) {
          case async::Step::done: co_return async::Attempt::ok();
          case async::Step::retry: co_return async::Attempt::again(csi::status_text(st));
          case async::Step::stop: co_return async::Attempt::final_error(csi::status_text(st));
        }
        co_return async::Attempt::final_error(csi::status_text(st));
      },
      claim_retry);
  if (!claimed.ok()) {
    const std::string why = claimed.end == async::RetryEnd::exhausted
                                ? "gave up waiting for the claim after " + std::to_string(claimed.attempts) +
                                      " attempts: " + claimed.last_error
                                : claimed.last_error;
    co_return domain::error("claim of volume " + volume_id + " failed: " + why);
  }
  events_("Claimed", "volume " + volume_id + " claimed");

  MountResult mounted;
  async::RetryOptions mount_retry;
  mount_retry.backoff = options_.mount_backoff;
  const auto done = co_await async::retry(
      [&](unsigned) -> asio::awaitable<async::Attempt> {
        mounted = co_await mounter_.mount(alloc_.id, answer.volume(), request.mount_options, options_.volume_group);
        if (mounted.ok()) co_return async::Attempt::ok();
        co_return mounted.retryable ? async::Attempt::again(mounted.error) : async::Attempt::final_error(mounted.error);
      },
      mount_retry);
  if (!done.ok()) co_return domain::error("mount of volume " + volume_id + " failed: " + done.last_error);
  events_("Mounted", "volume " + volume_id + " mounted at " + mounted.path);
  co_return mounted.path;
}

void CsiHook::postrun() {
  if (released_ || claimed_.empty()) return;
  released_ = true;
  mounter_.release(alloc_.id, claimed());
  events_("Released", "volumes handed over for unmount and release: " + std::to_string(claimed_.size()));
}

}  // namespace mooring::nodeagent
