// Test fakes for the volume manager: a node plugin that records every call (with the request),
// fails or hangs on demand, takes a configurable time per call and tracks how many calls run at
// once per volume; a mount table it keeps in step with what it "mounted"; and the plugin lookup
// the test sets healthy and unhealthy as the supervisor would.
#pragma once

#include "services/nodeagent/volumes/mount_table.hpp"
#include "services/nodeagent/volumes/node_plugins.hpp"

#include "csi/v1/csi.pb.h"
#include "shared/async/wake_signal.hpp"
#include "shared/csi/error_table.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mooring::nodeagent {

class FakeMountTable final : public MountTable {
 public:
  bool is_mounted(const std::filesystem::path& path) const override { return mounted.contains(path.string()); }
  std::set<std::string> mounted;
};

struct FakeCall {
  csi::Rpc rpc;
  std::string volume_id;  // the CSI volume id (external id)
  std::string path;       // staging path (stage/unstage) or target path (publish/unpublish)
};

class FakeNodeCsi final : public NodeVolumeCalls {
 public:
  FakeNodeCsi(boost::asio::any_io_executor executor, FakeMountTable& table)
      : executor_(std::move(executor)), table_(table) {}

  // Scripted failures: the next calls of `rpc` (optionally only for `volume_id`) fail with `code`.
  void fail_next(csi::Rpc rpc, grpc::StatusCode code, int times = 1, std::string volume_id = {}) {
    for (int i = 0; i < times; ++i) failures_.push_back({rpc, code, volume_id});
  }
  // Every call of `rpc` for `volume_id` (empty: any) fails until cleared.
  void fail_always(csi::Rpc rpc, grpc::StatusCode code, std::string volume_id = {}) {
    always_.push_back({rpc, code, std::move(volume_id)});
  }
  void clear_failures() {
    failures_.clear();
    always_.clear();
  }
  // Calls of `rpc` never answer until cancelled (then CANCELLED, as the real client reports).
  void hang(csi::Rpc rpc, bool on = true) {
    if (on) {
      hanging_.insert(rpc);
    } else {
      hanging_.erase(rpc);
    }
  }
  std::chrono::milliseconds delay{0};
  // Runs inside each call before it answers (e.g. to read the record on disk).
  std::function<void(const FakeCall&)> on_call;

  std::vector<FakeCall> calls;
  ::csi::v1::NodeStageVolumeRequest last_stage;
  ::csi::v1::NodePublishVolumeRequest last_publish;
  ::csi::v1::NodeExpandVolumeRequest last_expand;
  ::csi::v1::NodeGetVolumeStatsRequest last_stats;
  // What NodeGetVolumeStats answers (usage and condition) when it succeeds.
  ::csi::v1::NodeGetVolumeStatsResponse stats_answer;
  int max_in_flight_per_volume = 0;
  int max_in_flight_total = 0;

  int count(csi::Rpc rpc, const std::string& volume_id = {}) const {
    return static_cast<int>(std::count_if(calls.begin(), calls.end(), [&](const FakeCall& c) {
      return c.rpc == rpc && (volume_id.empty() || c.volume_id == volume_id);
    }));
  }
  std::vector<csi::Rpc> sequence(const std::string& volume_id = {}) const {
    std::vector<csi::Rpc> out;
    for (const auto& c : calls) {
      if (volume_id.empty() || c.volume_id == volume_id) out.push_back(c.rpc);
    }
    return out;
  }

  rpc::CsiClient::Call<::csi::v1::NodeStageVolumeResponse> stage(const ::csi::v1::NodeStageVolumeRequest& r) override {
    last_stage = r;
    FakeCall call{csi::Rpc::NodeStageVolume, r.volume_id(), r.staging_target_path()};
    co_return co_await run<::csi::v1::NodeStageVolumeResponse>(std::move(call));
  }
  rpc::CsiClient::Call<::csi::v1::NodeUnstageVolumeResponse> unstage(const ::csi::v1::NodeUnstageVolumeRequest& r) override {
    FakeCall call{csi::Rpc::NodeUnstageVolume, r.volume_id(), r.staging_target_path()};
    co_return co_await run<::csi::v1::NodeUnstageVolumeResponse>(std::move(call));
  }
  rpc::CsiClient::Call<::csi::v1::NodePublishVolumeResponse> publish(const ::csi::v1::NodePublishVolumeRequest& r) override {
    last_publish = r;
    FakeCall call{csi::Rpc::NodePublishVolume, r.volume_id(), r.target_path()};
    co_return co_await run<::csi::v1::NodePublishVolumeResponse>(std::move(call));
  }
  rpc::CsiClient::Call<::csi::v1::NodeUnpublishVolumeResponse> unpublish(const ::csi::v1::NodeUnpublishVolumeRequest& r) override {
    FakeCall call{csi::Rpc::NodeUnpublishVolume, r.volume_id(), r.target_path()};
    co_return co_await run<::csi::v1::NodeUnpublishVolumeResponse>(std::move(call));
  }
  // Answers with the requested size as the new capacity.
  rpc::CsiClient::Call<::csi::v1::NodeExpandVolumeResponse> expand(const ::csi::v1::NodeExpandVolumeRequest& r) override {
    last_expand = r;
    FakeCall call{csi::Rpc::NodeExpandVolume, r.volume_id(), r.volume_path()};
    auto result = co_await run<::csi::v1::NodeExpandVolumeResponse>(std::move(call));
    if (result.ok()) result.response.set_capacity_bytes(r.capacity_range().required_bytes());
    co_return result;
  }
  rpc::CsiClient::Call<::csi::v1::NodeGetVolumeStatsResponse> stats(const ::csi::v1::NodeGetVolumeStatsRequest& r) override {
    last_stats = r;
    FakeCall call{csi::Rpc::NodeGetVolumeStats, r.volume_id(), r.volume_path()};
    auto result = co_await run<::csi::v1::NodeGetVolumeStatsResponse>(std::move(call));
    if (result.ok()) result.response = stats_answer;
    co_return result;
  }

 private:
  struct Failure {
    csi::Rpc rpc;
    grpc::StatusCode code;
    std::string volume_id;
    bool matches(const FakeCall& c) const { return c.rpc == rpc && (volume_id.empty() || volume_id == c.volume_id); }
  };

  template <class Response>
  boost::asio::awaitable<rpc::CsiResult<Response>> run(FakeCall call) {
    calls.push_back(call);
    const int per_volume = ++in_flight_[call.volume_id];
    max_in_flight_per_volume = std::max(max_in_flight_per_volume, per_volume);
    max_in_flight_total = std::max(max_in_flight_total, ++in_flight_total_);
    struct Leave {
      FakeNodeCsi& self;
      std::string volume;
      ~Leave() {
        --self.in_flight_[volume];
        --self.in_flight_total_;
      }
    } leave{*this, call.volume_id};

    if (on_call) on_call(call);
    grpc::Status status = grpc::Status::OK;
    if (hanging_.contains(call.rpc) || delay.count() > 0) {
      boost::asio::steady_timer timer(executor_);
      if (hanging_.contains(call.rpc)) {
        timer.expires_at(boost::asio::steady_timer::time_point::max());
      } else {
        timer.expires_after(delay);
      }
      auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) status = grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
    }
    if (status.ok()) {
      auto it = std::find_if(failures_.begin(), failures_.end(), [&](const Failure& f) { return f.matches(call); });
      if (it != failures_.end()) {
        status = grpc::Status(it->code, "injected");
        failures_.erase(it);
      } else if (auto a = std::find_if(always_.begin(), always_.end(), [&](const Failure& f) { return f.matches(call); });
                 a != always_.end()) {
        status = grpc::Status(a->code, "injected (always)");
      }
    }
    if (status.ok() && call.rpc != csi::Rpc::NodeExpandVolume && call.rpc != csi::Rpc::NodeGetVolumeStats) {
      if (call.rpc == csi::Rpc::NodeStageVolume || call.rpc == csi::Rpc::NodePublishVolume) {
        table_.mounted.insert(call.path);
      } else {
        table_.mounted.erase(call.path);
      }
    }
    rpc::CsiResult<Response> result;
    result.status = status;
    result.outcome = csi::classify(call.rpc, status.error_code());
    co_return result;
  }

  boost::asio::any_io_executor executor_;
  FakeMountTable& table_;
  std::deque<Failure> failures_;
  std::vector<Failure> always_;
  std::set<csi::Rpc> hanging_;
  std::map<std::string, int> in_flight_;
  int in_flight_total_ = 0;
};

class FakeNodePlugins final : public NodePluginLookup {
 public:
  explicit FakeNodePlugins(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  // `plugin` now runs healthy; wakes the unmounts waiting for it.
  void set_healthy(const std::string& plugin_id, NodePlugin plugin) {
    running_[plugin_id] = std::move(plugin);
    healthy_again(plugin_id).notify();
  }
  void set_unhealthy(const std::string& plugin_id) { running_.erase(plugin_id); }

  std::optional<NodePlugin> find(const std::string& plugin_id) override {
    auto it = running_.find(plugin_id);
    if (it == running_.end()) return std::nullopt;
    return it->second;
  }
  void limits_exhausted(const std::string& plugin_id) override { exhausted.push_back(plugin_id); }
  std::vector<std::string> exhausted;  // the plugins whose limits were asked for again
  async::WakeSignal& healthy_again(const std::string& plugin_id) override {
    auto& signal = signals_[plugin_id];
    if (!signal) signal = std::make_unique<async::WakeSignal>(executor_);
    return *signal;
  }

 private:
  boost::asio::any_io_executor executor_;
  std::map<std::string, NodePlugin> running_;
  std::map<std::string, std::unique_ptr<async::WakeSignal>> signals_;
};

}  // namespace mooring::nodeagent
