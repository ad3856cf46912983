// In-memory ControlPlaneCalls for unit tests of the alloc runner, the CSI hook and the allocation
// set: scripted claim answers, recorded calls, a switch to be "unreachable". No sockets.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "services/nodeagent/controlplane/controlplane_calls.hpp"

namespace mooring::nodeagent {

class FakeControlPlaneCalls final : public ControlPlaneCalls {
 public:
  // Answers for claims, consumed in order; when empty, claims succeed with `mount_info_for`.
  std::deque<grpc::Status> claim_answers;
  std::function<::mooring::v1::VolumeMountInfo(const ::mooring::v1::ClaimVolumeRequest&)> mount_info_for =
      [](const ::mooring::v1::ClaimVolumeRequest& r) {
        ::mooring::v1::VolumeMountInfo info;
        info.set_volume_id(r.volume_id());
        info.set_external_id("ext-" + r.volume_id());
        info.set_plugin_id("fake");
        info.set_access_mode(r.access_mode());
        info.set_attachment_mode(r.attachment_mode());
        return info;
      };
  bool down = false;  // every call fails with UNAVAILABLE
  std::vector<::mooring::v1::ClaimVolumeRequest> claims;
  std::vector<::mooring::v1::UpdateAllocationsRequest> updates;
  std::vector<::mooring::v1::UnpublishVolumeRequest> unpublishes;
  std::vector<::mooring::v1::WatchAllocationsRequest> watches;        // every watch request, in order
  std::deque<::mooring::v1::WatchAllocationsResponse> watch_answers;  // consumed in order, then:
  ::mooring::v1::WatchAllocationsResponse watch_answer;

  boost::asio::awaitable<grpc::Status> watch_allocations(const ::mooring::v1::WatchAllocationsRequest& request,
                                                         ::mooring::v1::WatchAllocationsResponse& response) override {
    if (down) co_return unavailable();
    watches.push_back(request);
    if (!watch_answers.empty()) {
      response = watch_answers.front();
      watch_answers.pop_front();
    } else {
      response = watch_answer;
    }
    co_return grpc::Status::OK;
  }
  std::function<void()> during_update;  // runs inside update_allocations, as if while it was in flight
  int refused_updates = 0;              // update_allocations calls answered UNAVAILABLE (down)
  boost::asio::awaitable<grpc::Status> update_allocations(const ::mooring::v1::UpdateAllocationsRequest& r) override {
    if (down) {
      ++refused_updates;
      co_return unavailable();
    }
    if (auto hook = std::exchange(during_update, nullptr)) hook();
    updates.push_back(r);
    co_return grpc::Status::OK;
  }
  std::function<void()> during_claim;  // runs inside claim_volume, as if while it was in flight
  boost::asio::awaitable<grpc::Status> claim_volume(const ::mooring::v1::ClaimVolumeRequest& r,
                                                    ::mooring::v1::ClaimVolumeResponse& response) override {
    claims.push_back(r);
    if (down) co_return unavailable();
    if (auto hook = std::exchange(during_claim, nullptr)) hook();
    if (!claim_answers.empty()) {
      auto st = claim_answers.front();
      claim_answers.pop_front();
      if (!st.ok()) co_return st;
    }
    *response.mutable_volume() = mount_info_for(r);
    co_return grpc::Status::OK;
  }
  boost::asio::awaitable<grpc::Status> unpublish_volume(const ::mooring::v1::UnpublishVolumeRequest& r) override {
    if (down) co_return unavailable();
    unpublishes.push_back(r);
    co_return grpc::Status::OK;
  }

  // The latest client status reported for `alloc_id` across all updates (UNSPECIFIED if none).
  ::mooring::v1::ClientStatus last_status(const std::string& alloc_id) const {
    auto out = ::mooring::v1::CLIENT_STATUS_UNSPECIFIED;
    for (const auto& u : updates)
      for (const auto& a : u.updates())
        if (a.alloc_id() == alloc_id) out = a.client_status();
    return out;
  }
  std::vector<std::string> event_types(const std::string& alloc_id) const {
    std::vector<std::string> out;
    for (const auto& u : updates)
      for (const auto& a : u.updates())
        if (a.alloc_id() == alloc_id)
          for (const auto& e : a.events()) out.push_back(e.type());
    return out;
  }

 private:
  static grpc::Status unavailable() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "control plane down"); }
};

}  // namespace mooring::nodeagent
