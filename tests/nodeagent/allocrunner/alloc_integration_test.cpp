// The whole node side with real processes and real bind mounts: the Agent (as the binary runs it)
// launching the real mooring-hostpath plugin, following a fake control plane that keeps claims
// and allocations, running tasks that write into their volume; and the NodeAgent gRPC service
// called like the control plane calls it. Root only (bind mounts).
#include <gtest/gtest.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fstream>
#include <iostream>

#include "mooring/v1/nodeagent.grpc.pb.h"
#include "services/nodeagent/agent.hpp"
#include "services/nodeagent/allocrunner/alloc_state.hpp"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "shared/rpc/client_call.hpp"
#include "tests/nodeagent/support/fake_controlplane.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class AllocIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    agent_ = std::make_unique<Agent>(io_.get_executor(), config(), options());
    agent_->start();
    ASSERT_TRUE(run_until([&] {
      const auto fp = agent_->status().fingerprint("hostpath");
      return fp && fp->healthy() && agent_->grpc_port() != 0;
    }));
    stub_ = v1::NodeAgent::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(agent_->grpc_port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (stopped_pid_) ::kill(stopped_pid_, SIGCONT);
    if (agent_) {
      bool done = false;
      asio::co_spawn(io_, agent_->shutdown(), [&](std::exception_ptr) { done = true; });
      run_until([&] { return done; }, 30s);
      agent_.reset();
    }
    tmp_.unmount_all();
  }

  AgentConfig config() {
    AgentConfig c;
    c.node_id = "node-1";
    c.node_name = "test-node";
    c.data_dir = (tmp_ / "agent").string();
    c.controlplane_addr = cp_.address();
    c.grpc_addr = "127.0.0.1:0";
    c.heartbeat_interval = heartbeat_interval_;
    c.kill_timeout = 2s;
    PluginConfig p;
    p.id = "hostpath";
    p.type = PluginRole::monolith;
    p.command = test::binary_path("mooring-hostpath").string();
    p.args = {"--data-dir", (tmp_ / "hp").string(), "--node-id", "csi-node-1"};
    // Long: a SIGSTOPped plugin must not be restarted during the test.
    p.health_timeout = 60s;
    p.probe_interval = 200ms;
    p.fingerprint_interval = 5s;
    p.stop_timeout = 3s;
    c.plugins.push_back(p);
    return c;
  }

  AgentOptions options() {
    AgentOptions o;
    o.restart_backoff = async::Backoff{200ms, 1s, 2.0, 0.0};
    o.final_heartbeat_timeout = 2s;
    o.watch_wait = 500ms;
    o.release_backoff = release_backoff_;
    o.claim_backoff_initial = 50ms;
    o.claim_backoff_max = 200ms;
    o.shutdown_grace = 1s;
    return o;
  }

  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 30s) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(10ms);
    }
    return true;
  }

  // One NodeAgent call from a coroutine on the agent's io_context (the agent serves it there too).
  grpc::Status call(rpc::StartUnary start) {
    grpc::Status status;
    bool done = false;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> { status = co_await rpc::unary(rpc::CallOptions{30s, false}, start); },
        [&](std::exception_ptr) { done = true; });
    EXPECT_TRUE(run_until([&] { return done; }, 40s));
    return status;
  }

  // Creates a volume through the agent's forwarded CreateVolume and registers it with the fake.
  v1::VolumeMountInfo create_volume(const std::string& id) {
    v1::CreateVolumeRequest req;
    req.set_plugin_id("hostpath");
    req.mutable_request()->set_name(id);
    auto* cap = req.mutable_request()->add_volume_capabilities();
    cap->mutable_mount();
    cap->mutable_access_mode()->set_mode(::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    ::csi::v1::CreateVolumeResponse resp;
    const auto st = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      stub_->async()->CreateVolume(ctx, &req, &resp, std::move(done));
    });
    EXPECT_TRUE(st.ok()) << st.error_message();
    v1::VolumeMountInfo info;
    info.set_volume_id(id);
    info.set_external_id(resp.volume().volume_id());
    info.set_plugin_id("hostpath");
    *info.mutable_volume_context() = resp.volume().volume_context();
    cp_.put_volume(info);
    return info;
  }

  static v1::Allocation alloc(const std::string& id, const std::string& volume, std::optional<std::string> script) {
    v1::Allocation a;
    a.set_id(id);
    a.set_name("job-" + id);
    a.set_node_id("node-1");
    a.set_desired_status(v1::DESIRED_STATUS_RUN);
    a.set_client_status(v1::CLIENT_STATUS_PENDING);
    auto* v = a.add_volumes();
    v->set_name("data");
    v->set_source(volume);
    v->set_access_mode(v1::ACCESS_MODE_SINGLE_NODE_WRITER);
    v->set_attachment_mode(v1::ATTACHMENT_MODE_FILE_SYSTEM);
    if (script) {
      a.mutable_task()->set_command("/bin/sh");
      a.mutable_task()->add_args("-c");
      a.mutable_task()->add_args(*script);
      a.mutable_task()->set_kill_timeout_ms(2000);
    }
    return a;
  }

  bool unpublished(const std::string& volume, const std::string& alloc_id) {
    for (const auto& u : cp_.unpublishes())
      if (u.volume_id() == volume && u.alloc_id() == alloc_id && u.node_id() == "node-1") return true;
    return false;
  }

  std::filesystem::path mount_root() { return tmp_ / "agent" / "mounts"; }

  std::chrono::milliseconds heartbeat_interval_ = 200ms;
  async::Backoff release_backoff_{50ms, 500ms, 2.0, 0.0};
  test::TempDir tmp_{"mooring-alloc-it"};
  FakeControlPlane cp_;
  asio::io_context io_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
  pid_t stopped_pid_ = 0;
};

TEST_F(AllocIntegration, TaskWritesIntoItsVolumeStopReleasesAndTheNextAllocationSeesTheData) {
  const auto info = create_volume("vol-a");
  const auto volume_dir = info.volume_context().contains("path")
                              ? std::filesystem::path(info.volume_context().at("path"))
                              : tmp_ / "hp" / "volumes" / info.external_id();
  cp_.put_allocation(alloc("a1", "vol-a", "echo hello > \"$MOORING_VOLUME_DATA/file\" && exec sleep 600"));
  ASSERT_TRUE(run_until([&] { return test::read_file(volume_dir / "file") == "hello\n"; }))
      << "the task did not write into its volume";
  ASSERT_TRUE(run_until([&] { return cp_.client_status("a1") == v1::CLIENT_STATUS_RUNNING; }));
  EXPECT_FALSE(test::mounts_under(mount_root()).empty());

  // Seed 004: the next allocation's claim waits while a1 still holds the volume.
  // Into its volume: a task behind its walls (issue 41) cannot write anywhere else on the host.
  const auto out = volume_dir / "seen.txt";
  cp_.put_allocation(alloc("a2", "vol-a", "cat \"$MOORING_VOLUME_DATA/file\" > \"$MOORING_VOLUME_DATA/seen.txt\""));
  ASSERT_TRUE(run_until([&] {
    int a2_claims = 0;
    for (const auto& c : cp_.claims()) a2_claims += c.alloc_id() == "a2";
    return a2_claims >= 2;
  }));
  EXPECT_EQ(cp_.client_status("a2"), v1::CLIENT_STATUS_PENDING);

  cp_.stop_allocation("a1");
  ASSERT_TRUE(run_until([&] { return cp_.client_status("a1") == v1::CLIENT_STATUS_COMPLETE; }));
  ASSERT_TRUE(run_until([&] { return unpublished("vol-a", "a1"); })) << "the claim was not released";
  ASSERT_TRUE(run_until([&] { return cp_.client_status("a2") == v1::CLIENT_STATUS_COMPLETE; }));
  EXPECT_EQ(test::read_file(out), "hello\n") << "the data is there for the next allocation";
  ASSERT_TRUE(run_until([&] { return unpublished("vol-a", "a2"); }));
  ASSERT_TRUE(run_until([&] { return test::mounts_under(mount_root()).empty(); })) << "mount table not clean";
  const auto events = cp_.event_types("a1");
  EXPECT_NE(std::find(events.begin(), events.end(), "Killing"), events.end());
  const auto a2_events = cp_.event_types("a2");
  EXPECT_NE(std::find(a2_events.begin(), a2_events.end(), "ClaimWaiting"), a2_events.end());
}

// Retries an hour apart and heartbeats 30 s apart: only the "control plane answers again" wake can
// send the release notice in time. The blip is seen by that call alone; the next call answered
// (the allocation watch, within half a second) must wake it.
class AllocIntegrationSlowRetries : public AllocIntegration {
 protected:
  AllocIntegrationSlowRetries() {
    heartbeat_interval_ = 30s;
    release_backoff_ = async::Backoff{std::chrono::hours(1), std::chrono::hours(1), 2.0, 0.0};
  }
};

TEST_F(AllocIntegrationSlowRetries, AReleaseNoticeThatFailedGoesOutWhenTheControlPlaneNextAnswers) {
  create_volume("vol-n");
  cp_.put_allocation(alloc("n1", "vol-n", std::nullopt));
  ASSERT_TRUE(run_until([&] { return cp_.client_status("n1") == v1::CLIENT_STATUS_RUNNING; }));
  cp_.fail_unpublishes(1);
  cp_.stop_allocation("n1");
  ASSERT_TRUE(run_until([&] { return test::mounts_under(mount_root()).empty(); })) << "not unmounted";
  const auto unmounted = Clock::now();
  ASSERT_TRUE(run_until([&] { return unpublished("vol-n", "n1"); }, 10s))
      << "the release notice waited for its hour-long backoff";
  std::cout << "release notice sent "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - unmounted).count()
            << " ms after the unmount, its first attempt failed\n";
}

TEST_F(AllocIntegration, PostrunReturnsAtOnceWhileThePluginIsStoppedAndReleaseFinishesAfter) {
  create_volume("vol-b");
  cp_.put_allocation(alloc("b1", "vol-b", std::nullopt));
  ASSERT_TRUE(run_until([&] { return cp_.client_status("b1") == v1::CLIENT_STATUS_RUNNING; }));
  ASSERT_FALSE(test::mounts_under(mount_root()).empty());
  const auto pid = agent_->supervisor("hostpath")->pid();
  ASSERT_TRUE(pid);
  ASSERT_TRUE(test::stop_process(*pid));
  stopped_pid_ = *pid;

  const auto t0 = Clock::now();
  cp_.stop_allocation("b1");
  ASSERT_TRUE(run_until([&] { return cp_.client_status("b1") == v1::CLIENT_STATUS_COMPLETE; }, 10s));
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, 5s) << "the allocation waited on a stopped plugin";
  EXPECT_FALSE(unpublished("vol-b", "b1")) << "released before the plugin could unmount";
  EXPECT_FALSE(test::mounts_under(mount_root()).empty());

  ::kill(*pid, SIGCONT);
  stopped_pid_ = 0;
  ASSERT_TRUE(run_until([&] { return unpublished("vol-b", "b1"); }, 60s));
  EXPECT_TRUE(test::mounts_under(mount_root()).empty());
}

TEST_F(AllocIntegration, NodeDetachVolumeUnmountsForTheControlPlane) {
  const auto info = create_volume("vol-c");
  cp_.put_allocation(alloc("c1", "vol-c", std::nullopt));
  ASSERT_TRUE(run_until([&] { return cp_.client_status("c1") == v1::CLIENT_STATUS_RUNNING; }));
  ASSERT_FALSE(test::mounts_under(mount_root()).empty());
  v1::NodeDetachVolumeRequest req;
  req.set_plugin_id("hostpath");
  req.set_volume_id("vol-c");
  req.set_external_id(info.external_id());
  req.set_alloc_id("c1");
  v1::NodeDetachVolumeResponse resp;
  const auto st = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->NodeDetachVolume(ctx, &req, &resp, std::move(done));
  });
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(test::mounts_under(mount_root()).empty());
  // Idempotent.
  const auto again = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->NodeDetachVolume(ctx, &req, &resp, std::move(done));
  });
  EXPECT_TRUE(again.ok()) << again.error_message();
  // A bad id changes nothing and says why.
  req.set_volume_id("../etc");
  const auto bad = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->NodeDetachVolume(ctx, &req, &resp, std::move(done));
  });
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(AllocIntegration, ControllerCallsAreForwardedAndAMissingPluginIsNamed) {
  const auto info = create_volume("vol-d");
  v1::ValidateVolumeCapabilitiesRequest req;
  req.set_plugin_id("hostpath");
  req.mutable_request()->set_volume_id(info.external_id());
  auto* cap = req.mutable_request()->add_volume_capabilities();
  cap->mutable_mount();
  cap->mutable_access_mode()->set_mode(::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  ::csi::v1::ValidateVolumeCapabilitiesResponse resp;
  auto st = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->ValidateVolumeCapabilities(ctx, &req, &resp, std::move(done));
  });
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(resp.has_confirmed());

  // The plugin's own status passes through unchanged.
  req.mutable_request()->set_volume_id("no-such-volume");
  st = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->ValidateVolumeCapabilities(ctx, &req, &resp, std::move(done));
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();

  v1::DeleteVolumeRequest del;
  del.set_plugin_id("nope");
  del.mutable_request()->set_volume_id(info.external_id());
  ::csi::v1::DeleteVolumeResponse del_resp;
  st = call([&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
    stub_->async()->DeleteVolume(ctx, &del, &del_resp, std::move(done));
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(), "plugin nope not running on node node-1");
}

TEST_F(AllocIntegration, ShutdownIsPromptWhileAnUnmountWaitsOnAStoppedPlugin) {
  create_volume("vol-e");
  cp_.put_allocation(alloc("e1", "vol-e", std::nullopt));
  ASSERT_TRUE(run_until([&] { return cp_.client_status("e1") == v1::CLIENT_STATUS_RUNNING; }));
  const auto pid = agent_->supervisor("hostpath")->pid();
  ASSERT_TRUE(pid);
  ASSERT_TRUE(test::stop_process(*pid));
  stopped_pid_ = *pid;
  cp_.stop_allocation("e1");
  ASSERT_TRUE(run_until([&] { return cp_.client_status("e1") == v1::CLIENT_STATUS_COMPLETE; }, 10s));
  // The plugin is still stopped: the release is stuck in its unmount. Shutdown must not wait on it
  // (the plugin's own SIGTERM -> SIGKILL is bounded by its stop_timeout).
  const auto t0 = Clock::now();
  bool done = false;
  asio::co_spawn(io_, agent_->shutdown(), [&](std::exception_ptr) { done = true; });
  ASSERT_TRUE(run_until([&] { return done; }, 30s));
  EXPECT_LT(Clock::now() - t0, 15s);
  agent_.reset();
  ::kill(*pid, SIGCONT);
  stopped_pid_ = 0;
  // The release is on disk: a restarted agent resumes it.
  agent_ = std::make_unique<Agent>(io_.get_executor(), config(), options());
  agent_->start();
  ASSERT_TRUE(run_until([&] { return unpublished("vol-e", "e1"); }, 60s));
  EXPECT_TRUE(run_until([&] { return test::mounts_under(mount_root()).empty(); }));
}

// A crash after the allocation's Postrun reached its state file but before the release reached
// the mount records (two files, written on two threads): the restarted agent finds the mount
// recorded in use by an allocation that already gave it up, and releases it all the same.
TEST_F(AllocIntegration, RestartReleasesMountsOfAnAllocationWhosePostrunRanBeforeItsReleaseWasRecorded) {
  create_volume("vol-p");
  cp_.put_allocation(alloc("p1", "vol-p", std::nullopt));
  ASSERT_TRUE(run_until([&] { return cp_.client_status("p1") == v1::CLIENT_STATUS_RUNNING; }));
  bool done = false;
  asio::co_spawn(io_, agent_->shutdown(), [&](std::exception_ptr) { done = true; });
  ASSERT_TRUE(run_until([&] { return done; }, 30s));
  agent_.reset();
  ASSERT_FALSE(test::mounts_under(mount_root()).empty()) << "an agent restart leaves running allocations mounted";

  {  // What the crash left: Postrun done in the state, nothing released in the mount records.
    AllocStateStore states(tmp_ / "agent" / "allocs");
    auto all = states.load_all();
    ASSERT_EQ(all.size(), 1u);
    all[0].postrun_done = true;
    all[0].client_status = domain::ClientStatus::complete;
    ASSERT_TRUE(states.save(all[0]).ok());
  }
  EXPECT_FALSE(unpublished("vol-p", "p1"));

  agent_ = std::make_unique<Agent>(io_.get_executor(), config(), options());
  agent_->start();
  ASSERT_TRUE(run_until([&] { return unpublished("vol-p", "p1"); }, 30s)) << "the mount was never released";
  EXPECT_TRUE(run_until([&] { return test::mounts_under(mount_root()).empty(); })) << "mount table not clean";
}

}  // namespace
}  // namespace mooring::nodeagent
