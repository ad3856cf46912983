// The CSI hook against a fake control plane and a fake volume manager: claim retries, final claim
// errors, restore after a restart, Postrun handing everything claimed to the release.
#include "services/nodeagent/allocrunner/csi_hook.hpp"

#include <gtest/gtest.h>
#include <grpcpp/support/status.h>

#include <boost/asio/io_context.hpp>

#include "tests/nodeagent/support/fake_controlplane_calls.hpp"
#include "tests/nodeagent/support/fake_volume_mounter.hpp"
#include "tests/nodeagent/support/run_async.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

domain::Allocation alloc_with_volume(const std::string& id = "a1") {
  domain::Allocation a;
  a.id = id;
  a.name = "web";
  a.node_id = "n1";
  domain::VolumeRequest r;
  r.name = "data";
  r.source = "vol1";
  r.access_mode = domain::AccessMode::single_node_writer;
  r.attachment_mode = domain::AttachmentMode::file_system;
  a.volumes["data"] = r;
  return a;
}

CsiHookOptions fast_options() {
  CsiHookOptions o;
  o.node_id = "n1";
  o.claim_backoff = async::Backoff{1ms, 5ms, 2.0, 0.0, 10s};
  o.mount_backoff = async::Backoff{1ms, 5ms, 2.0, 0.0, 10s};
  return o;
}

struct Events {
  std::vector<std::pair<std::string, std::string>> list;
  AllocEventSink sink() {
    return [this](std::string t, std::string m) { list.emplace_back(std::move(t), std::move(m)); };
  }
  int count(const std::string& type) const {
    int n = 0;
    for (const auto& [t, _] : list) n += t == type;
    return n;
  }
};

TEST(CsiHookTest, ClaimRetriedWhileMaxClaimsReachedThenSucceeds) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  cp.claim_answers = {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "volume max claims reached"),
                      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "volume max claims reached"),
                      grpc::Status(grpc::StatusCode::UNAVAILABLE, "control plane restarting")};
  CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink());
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> {
    auto st = co_await hook.prerun(env);
    EXPECT_TRUE(st.ok()) << (st ? "" : st.error());
  });
  ASSERT_EQ(cp.claims.size(), 4u);
  EXPECT_EQ(cp.claims[0].volume_id(), "vol1");
  EXPECT_EQ(cp.claims[0].alloc_id(), "a1");
  EXPECT_EQ(cp.claims[0].node_id(), "n1");
  EXPECT_EQ(cp.claims[0].mode(), ::mooring::v1::CLAIM_MODE_WRITE);
  EXPECT_EQ(env["MOORING_VOLUME_DATA"], "/fake/a1/vol1");
  ASSERT_EQ(mounter.mounts.size(), 1u);
  // One waiting event per distinct reason, not one per attempt.
  EXPECT_EQ(events.count("ClaimWaiting"), 2);
  EXPECT_EQ(events.count("Claimed"), 1);
  EXPECT_EQ(events.count("Mounted"), 1);
}

// A ControllerPublish at the node's limit: the claim is retried, and the node plugins' limits are
// read again first (so placement learns the lowered max volumes); other waits ask for nothing.
TEST(CsiHookTest, AClaimAtTheNodesLimitAsksForTheLimitsAgain) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  cp.claim_answers = {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "volume max claims reached"),
                      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "ControllerPublishVolume: max volumes")};
  CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink());
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> {
    auto st = co_await hook.prerun(env);
    EXPECT_TRUE(st.ok()) << (st ? "" : st.error());
  });
  EXPECT_EQ(cp.claims.size(), 3u);
  EXPECT_EQ(mounter.limits_asked, 1);
}

TEST(CsiHookTest, FinalClaimErrorFailsPrerunAndPostrunStillReleases) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  cp.claim_answers = {grpc::Status(grpc::StatusCode::NOT_FOUND, "volume not found: vol1")};
  std::vector<std::string> noted;
  CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink(), {},
               [&](const std::string& v) -> asio::awaitable<void> {
                 noted.push_back(v);
                 co_return;
               });
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> {
    auto st = co_await hook.prerun(env);
    EXPECT_FALSE(st.ok());
    if (!st) {
      EXPECT_NE(st.error().find("volume not found: vol1"), std::string::npos) << st.error();
    }
  });
  EXPECT_EQ(cp.claims.size(), 1u) << "a final error is not retried";
  EXPECT_TRUE(mounter.mounts.empty());
  EXPECT_EQ(noted, std::vector<std::string>{"vol1"}) << "the claim is persisted before it is sent";
  hook.postrun();
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_EQ(mounter.releases[0].first, "a1");
  EXPECT_EQ(mounter.releases[0].second, std::vector<std::string>{"vol1"});
  hook.postrun();
  EXPECT_EQ(mounter.releases.size(), 1u) << "Postrun releases once";
}

TEST(CsiHookTest, VolumeStillMountedAfterRestartIsKeptWithoutNewClaim) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/mnt/restored", .mounted = true}};
  CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink(), {"vol1"});
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE((co_await hook.prerun(env)).ok()); });
  EXPECT_TRUE(cp.claims.empty());
  EXPECT_TRUE(mounter.mounts.empty());
  EXPECT_EQ(env["MOORING_VOLUME_DATA"], "/mnt/restored");
  EXPECT_EQ(events.count("Restored"), 1);
  hook.postrun();
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_EQ(mounter.releases[0].second, std::vector<std::string>{"vol1"});
}

TEST(CsiHookTest, RecordPresentButMountGoneClaimsAndMountsAgain) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  mounter.restored["a1"] = {RestoredVolume{
      .volume_id = "vol1", .path = "/mnt/old", .mounted = false, .reason = "not mounted any more"}};
  CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink(), {"vol1"});
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE((co_await hook.prerun(env)).ok()); });
  EXPECT_EQ(cp.claims.size(), 1u);
  EXPECT_EQ(mounter.mounts.size(), 1u);
  EXPECT_EQ(env["MOORING_VOLUME_DATA"], "/fake/a1/vol1");
  EXPECT_EQ(events.count("Remounting"), 1);
}

TEST(CsiHookTest, RetryableMountFailureIsRetriedFinalOneFails) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  MountResult retryable;
  retryable.error = "plugin fake unavailable";
  retryable.retryable = true;
  mounter.mount_failures = {retryable};
  {
    CsiHook hook(alloc_with_volume(), cp, mounter, fast_options(), events.sink());
    std::map<std::string, std::string> env;
    run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE((co_await hook.prerun(env)).ok()); });
    EXPECT_EQ(mounter.mounts.size(), 2u);
  }
  MountResult final_error;
  final_error.error = "NodePublishVolume: INVALID_ARGUMENT";
  mounter.mount_failures = {final_error};
  CsiHook hook(alloc_with_volume("a2"), cp, mounter, fast_options(), events.sink());
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_FALSE((co_await hook.prerun(env)).ok()); });
  EXPECT_EQ(mounter.mounts.size(), 3u);
}

TEST(CsiHookTest, PerAllocVolumeClaimsTheIndexedId) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  Events events;
  auto a = alloc_with_volume();
  a.index = 2;
  a.volumes["data"].per_alloc = true;
  a.volumes["data"].read_only = true;
  CsiHook hook(a, cp, mounter, fast_options(), events.sink());
  std::map<std::string, std::string> env;
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE((co_await hook.prerun(env)).ok()); });
  ASSERT_EQ(cp.claims.size(), 1u);
  EXPECT_EQ(cp.claims[0].volume_id(), "vol1[2]");
  EXPECT_EQ(cp.claims[0].mode(), ::mooring::v1::CLAIM_MODE_READ);
}

TEST(CsiHookTest, ClaimStatusClassification) {
  using C = grpc::StatusCode;
  auto step = [](C c) { return classify_claim_status(grpc::Status(c, "x")); };
  EXPECT_EQ(classify_claim_status(grpc::Status::OK), async::Step::done);
  for (auto c : {C::FAILED_PRECONDITION, C::RESOURCE_EXHAUSTED, C::UNAVAILABLE, C::DEADLINE_EXCEEDED, C::ABORTED,
                 C::INTERNAL, C::UNKNOWN, C::CANCELLED})
    EXPECT_EQ(step(c), async::Step::retry) << static_cast<int>(c);
  for (auto c : {C::NOT_FOUND, C::INVALID_ARGUMENT, C::PERMISSION_DENIED, C::UNAUTHENTICATED, C::UNIMPLEMENTED,
                 C::ALREADY_EXISTS, C::OUT_OF_RANGE})
    EXPECT_EQ(step(c), async::Step::stop) << static_cast<int>(c);
}

}  // namespace
}  // namespace mooring::nodeagent
