// Bench: Postrun in process, with microsecond clocks. The node agent's VolumeManager (the code the
// agent runs; CsiHook::postrun calls release()) over records on the real disk, with a node plugin
// that answers at once for the mounts and then either hangs on every call (frozen) or is not
// running at all (killed). Times release() per allocation (one volume each) and then shutdown()
// with every release still pending. No kernel mounts: the plugin and mount table are fakes, so
// what is timed is the agent's own work (durable record write, task start).
// Reference, same run: one durable write (shared/durable write_durable, the slot file the agent
// uses) of a record-sized file, the floor for a Postrun that records its release before returning.
// Output: one JSON object on stdout.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "shared/durable/durable_file.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace mooring;
using namespace mooring::nodeagent;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

class FakeMounts final : public MountTable {
 public:
  bool is_mounted(const fs::path& p) const override { return paths.count(p.string()) > 0; }
  std::set<std::string> paths;
};

// Answers at once while `frozen` is false; afterwards every call hangs until cancelled (then
// CANCELLED, as a gRPC call does), like a plugin stopped with SIGSTOP.
class FakeCalls final : public NodeVolumeCalls {
 public:
  explicit FakeCalls(FakeMounts& m) : mounts_(m) {}
  bool frozen = false;

  rpc::CsiClient::Call<::csi::v1::NodeStageVolumeResponse> stage(const ::csi::v1::NodeStageVolumeRequest& r) override {
    return answer<::csi::v1::NodeStageVolumeResponse>(r.staging_target_path(), true);
  }
  rpc::CsiClient::Call<::csi::v1::NodeUnstageVolumeResponse> unstage(const ::csi::v1::NodeUnstageVolumeRequest& r) override {
    return answer<::csi::v1::NodeUnstageVolumeResponse>(r.staging_target_path(), false);
  }
  rpc::CsiClient::Call<::csi::v1::NodePublishVolumeResponse> publish(const ::csi::v1::NodePublishVolumeRequest& r) override {
    return answer<::csi::v1::NodePublishVolumeResponse>(r.target_path(), true);
  }
  rpc::CsiClient::Call<::csi::v1::NodeUnpublishVolumeResponse> unpublish(const ::csi::v1::NodeUnpublishVolumeRequest& r) override {
    return answer<::csi::v1::NodeUnpublishVolumeResponse>(r.target_path(), false);
  }
  rpc::CsiClient::Call<::csi::v1::NodeExpandVolumeResponse> expand(const ::csi::v1::NodeExpandVolumeRequest&) override {
    return expand_answer();  // not used by this bench
  }
  rpc::CsiClient::Call<::csi::v1::NodeGetVolumeStatsResponse> stats(const ::csi::v1::NodeGetVolumeStatsRequest&) override {
    return stats_answer();  // the fake plugin does not advertise GET_VOLUME_STATS
  }

 private:
  template <class Response>
  asio::awaitable<rpc::CsiResult<Response>> answer(std::string path, bool mount) {
    if (frozen) {
      co_await async::sleep_for(std::chrono::hours(1));
      rpc::CsiResult<Response> r;
      r.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      r.outcome = mooring::csi::Outcome::uncertain;
      co_return r;
    }
    if (mount) mounts_.paths.insert(path);
    else mounts_.paths.erase(path);
    co_return rpc::CsiResult<Response>{};
  }
  asio::awaitable<rpc::CsiResult<::csi::v1::NodeExpandVolumeResponse>> expand_answer() {
    co_return rpc::CsiResult<::csi::v1::NodeExpandVolumeResponse>{};
  }
  asio::awaitable<rpc::CsiResult<::csi::v1::NodeGetVolumeStatsResponse>> stats_answer() {
    co_return rpc::CsiResult<::csi::v1::NodeGetVolumeStatsResponse>{};
  }
  FakeMounts& mounts_;
};

class FakePlugins final : public NodePluginLookup {
 public:
  FakePlugins(asio::any_io_executor ex, std::shared_ptr<FakeCalls> calls) : calls_(std::move(calls)), wake_(ex) {}
  bool running = true;
  std::optional<NodePlugin> find(const std::string&) override {
    if (!running) return std::nullopt;
    return NodePlugin{calls_, true};
  }
  async::WakeSignal& healthy_again(const std::string&) override { return wake_; }
  void limits_exhausted(const std::string&) override {}  // the bench measures releases, not limits

 private:
  std::shared_ptr<FakeCalls> calls_;
  async::WakeSignal wake_;
};

// The durable-write floor: what MountRecordStore does for one record (each record is rewritten,
// so its slots exist after its first two writes; those are not timed).
double durable_write_us(const fs::path& dir, int i, const std::string& content) {
  const auto file = dir / ("ref-" + std::to_string(i) + ".json");
  for (int warm = 0; warm < 2; ++warm)
    if (auto ec = durable::write_durable(file, content)) throw std::runtime_error("reference write failed: " + ec.message());
  const auto t0 = Clock::now();
  if (auto ec = durable::write_durable(file, content))
    throw std::runtime_error("reference write failed: " + ec.message());
  return bench::us_since(t0);
}

json summary(const std::vector<double>& us) {
  return {{"n", us.size()},
          {"p50_us", bench::percentile(us, 50)},
          {"p99_us", bench::percentile(us, 99)},
          {"max_us", bench::percentile(us, 100)}};
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  int n = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--n") n = std::stoi(argv[i + 1]);
  }
  if (dir.empty() || n <= 0) {
    std::cerr << "usage: mooring-bench-postrun --dir DIR [--n N]\n";
    return 2;
  }
  log::configure(log::Level::info, log::Format::text);
  fs::remove_all(dir);
  fs::create_directories(dir / "ref");

  json out;
  for (const std::string mode : {"frozen", "killed"}) {
    asio::io_context io{1};
    FakeMounts mounts;
    auto calls = std::make_shared<FakeCalls>(mounts);
    FakePlugins plugins(io.get_executor(), calls);
    VolumeManagerOptions opts;
    opts.mount_root = dir / mode / "mounts";
    opts.state_dir = dir / mode / "records";
    NotifyUnpublished notify = [](const std::string&, const std::string&) -> asio::awaitable<domain::Status> {
      co_return domain::Status{};
    };
    auto vm = std::make_unique<VolumeManager>(io.get_executor(), plugins, mounts, notify, opts);
    if (auto st = vm->load(); !st) throw std::runtime_error(st.error());

    // Mount n volumes, one allocation each, with the plugin answering.
    auto mounted = asio::co_spawn(
        io,
        [&]() -> asio::awaitable<int> {
          int ok = 0;
          for (int i = 0; i < n; ++i) {
            domain::VolumeMount m;
            m.volume_id = "vol-" + std::to_string(i);
            m.external_id = "ext-" + std::to_string(i);
            m.plugin_id = "hostpath";
            m.access_mode = domain::AccessMode::single_node_writer;
            m.attachment_mode = domain::AttachmentMode::file_system;
            // Named locals, not temporaries: GCC 12 mishandles aggregate temporaries passed by
            // value into a coroutine (docs/engineering-notes.md).
            std::string alloc = "alloc-" + std::to_string(i);
            domain::MountOptions none;
            auto r = co_await vm->mount(alloc, m, none);
            ok += r.ok() ? 1 : 0;
          }
          co_return ok;
        },
        asio::use_future);
    io.run();
    io.restart();
    const int ok = mounted.get();
    if (ok != n) throw std::runtime_error("only " + std::to_string(ok) + " of " + std::to_string(n) + " mounted");

    if (mode == "frozen") calls->frozen = true;
    else plugins.running = false;

    // Postrun: one release() per allocation, the way CsiHook::postrun calls it; the io context
    // runs between them so each release task starts (and hangs or waits for the plugin).
    std::vector<double> release_us;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      vm->release("alloc-" + std::to_string(i), {"vol-" + std::to_string(i)});
      release_us.push_back(bench::us_since(t0));
      io.poll();
    }
    const auto in_flight = vm->releases_in_flight();

    // Shutdown with every release pending.
    const auto t0 = Clock::now();
    auto stopped = asio::co_spawn(io, vm->shutdown(std::chrono::seconds(5)), asio::use_future);
    io.run();
    io.restart();
    const double shutdown_us = bench::us_since(t0);
    out[mode] = {{"release", summary(release_us)},
                 {"releases_in_flight", in_flight},
                 {"shutdown_us", shutdown_us},
                 {"shutdown_clean", stopped.get()}};
    vm.reset();
    io.run();
  }

  std::string record(400, 'x');  // about the size of a mount record
  std::vector<double> ref;
  for (int i = 0; i < n; ++i) ref.push_back(durable_write_us(dir / "ref", i, record));
  out["reference_durable_write"] = summary(ref);
  fs::remove_all(dir);
  std::cout << out.dump() << std::endl;
  return 0;
}
