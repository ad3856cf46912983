// The volume manager against a fake node plugin: what it sends, in which order, what it records
// before each call, how it serializes, and how releases retry, wake, notify, stop and resume.
#include "services/nodeagent/volumes/volume_manager.hpp"

#include "shared/wire/proto_convert.hpp"
#include "tests/nodeagent/volumes/volume_manager_fixture.hpp"

#include "mooring/v1/types.pb.h"

#include <boost/asio/detached.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

namespace mooring::nodeagent {
namespace {

TEST_F(VolumeManagerTest, MountStagesThenPublishesWithExternalIdContextsSecretsAndMergedOptions) {
  auto r = mount("alloc-1", volume("vol1"), domain::MountOptions{"", {"ro", "sync"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.path, target("alloc-1", "vol1"));
  EXPECT_EQ(csi->sequence(), (std::vector<Rpc>{Rpc::NodeStageVolume, Rpc::NodePublishVolume}));

  const auto& stage = csi->last_stage;
  EXPECT_EQ(stage.volume_id(), "ext-vol1");
  EXPECT_EQ(stage.staging_target_path(), staging("vol1"));
  EXPECT_EQ(stage.publish_context().at("device"), "/dev/fake");
  EXPECT_EQ(stage.secrets().at("token"), "s3cret");
  EXPECT_EQ(stage.volume_context().at("path"), "/data/vol1");
  ASSERT_TRUE(stage.volume_capability().has_mount());
  EXPECT_EQ(stage.volume_capability().mount().fs_type(), "ext4");  // the volume's, request has none
  EXPECT_EQ(std::vector<std::string>(stage.volume_capability().mount().mount_flags().begin(),
                                     stage.volume_capability().mount().mount_flags().end()),
            (std::vector<std::string>{"ro", "sync"}));  // the request's flags win
  EXPECT_EQ(stage.volume_capability().access_mode().mode(), ::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);

  const auto& publish = csi->last_publish;
  EXPECT_EQ(publish.volume_id(), "ext-vol1");
  EXPECT_EQ(publish.staging_target_path(), staging("vol1"));
  EXPECT_EQ(publish.target_path(), target("alloc-1", "vol1"));
  EXPECT_EQ(publish.secrets().at("token"), "s3cret");
  EXPECT_EQ(publish.volume_context().at("path"), "/data/vol1");
  EXPECT_EQ(publish.publish_context().at("device"), "/dev/fake");
  EXPECT_FALSE(publish.readonly());

  struct stat st {};
  ASSERT_EQ(::stat(staging("vol1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(std::filesystem::path(target("alloc-1", "vol1")).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto records = manager->records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].phase, MountPhase::mounted);
  EXPECT_EQ(records[0].external_id, "ext-vol1");
  EXPECT_EQ(records[0].staged, StepState::done);
  EXPECT_EQ(records[0].published, StepState::done);
}

TEST_F(VolumeManagerTest, MountFromTheWireMessageAndSecretsNeverReachTheRecord) {
  auto info = domain::to_proto(volume("vol1"));
  auto r = run(manager->mount("alloc-1", info));
  ASSERT_TRUE(r.ok()) << r.error;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "state")) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("s3cret"), std::string::npos) << entry.path();
  }
  info.set_access_mode(::mooring::v1::AccessMode(0));
  auto bad = run(manager->mount("alloc-2", info));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("access_mode"), std::string::npos) << bad.error;
}

::csi::v1::CapacityRange range(std::int64_t bytes) {
  ::csi::v1::CapacityRange r;
  r.set_required_bytes(bytes);
  return r;
}

// NodeExpandVolume goes through the volume room like a mount: the published record's paths, the
// provider's id, the secrets, a retry on a retryable answer, and never alongside another call on
// the same volume.
TEST_F(VolumeManagerTest, NodeExpansionUsesTheRecordTheSecretsTheRetryTableAndTheVolumeLock) {
  plugins.set_healthy("fake", NodePlugin{csi, true, true});
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  csi->fail_next(Rpc::NodeExpandVolume, grpc::StatusCode::UNAVAILABLE);  // the table retries it
  auto r = run(manager->expand("vol1", "alloc-1", "", range(2048), {{"token", "s3cret"}}));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.capacity_bytes, 2048);
  EXPECT_EQ(csi->count(Rpc::NodeExpandVolume), 2);
  EXPECT_EQ(csi->last_expand.volume_id(), "ext-vol1");
  EXPECT_EQ(csi->last_expand.volume_path(), target("alloc-1", "vol1"));
  EXPECT_EQ(csi->last_expand.staging_target_path(), staging("vol1"));
  EXPECT_EQ(csi->last_expand.secrets().at("token"), "s3cret");
  EXPECT_TRUE(csi->last_expand.volume_capability().has_mount());

  // An unmount started alongside waits for the expansion: one call per volume at a time.
  csi->delay = 20ms;
  auto expanded = std::make_shared<std::optional<ExpandResult>>();
  auto unmount_done = std::make_shared<bool>(false);
  asio::co_spawn(io, manager->expand("vol1", "alloc-1", "", range(4096), {}),
                 [expanded](std::exception_ptr, ExpandResult e) { *expanded = std::move(e); });
  asio::co_spawn(io, manager->unmount("alloc-1", "vol1"), [unmount_done](std::exception_ptr, UnmountResult) {
    *unmount_done = true;
  });
  ASSERT_TRUE(pump_until(io, [&] { return expanded->has_value() && *unmount_done; }, 10s));
  ASSERT_TRUE((*expanded)->ok()) << (*expanded)->error;
  EXPECT_EQ(csi->max_in_flight_per_volume, 1);
  EXPECT_EQ(csi->sequence("ext-vol1").back(), Rpc::NodeUnstageVolume) << "the unmount ran after the expansion";
}

TEST_F(VolumeManagerTest, NodeExpansionIsRefusedWithoutTheCapabilityOrAPublishedVolume) {
  auto missing = run(manager->expand("vol1", "", "", range(2048), {}));
  EXPECT_EQ(missing.code, grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.error.find("not published on this node"), std::string::npos) << missing.error;
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  auto refused = run(manager->expand("vol1", "", "", range(2048), {}));  // the plugin lacks EXPAND_VOLUME
  EXPECT_EQ(refused.code, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error.find("does not advertise EXPAND_VOLUME"), std::string::npos) << refused.error;
  EXPECT_EQ(csi->count(Rpc::NodeExpandVolume), 0);
  plugins.set_healthy("fake", NodePlugin{csi, true, true});
  csi->fail_always(Rpc::NodeExpandVolume, grpc::StatusCode::FAILED_PRECONDITION);  // in use, cannot grow online: final
  auto final_error = run(manager->expand("vol1", "", "", range(2048), {}));
  EXPECT_EQ(final_error.code, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(csi->count(Rpc::NodeExpandVolume), 1) << "a final error is not retried";
}

TEST_F(VolumeManagerTest, PluginWithoutStageUnstageIsOnlyPublished) {
  plugins.set_healthy("fake", NodePlugin{csi, false});
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(csi->sequence(), (std::vector<Rpc>{Rpc::NodePublishVolume}));
  EXPECT_EQ(csi->last_publish.staging_target_path(), "");
  ASSERT_TRUE(run(manager->unmount("alloc-1", "vol1")).ok());
  EXPECT_EQ(csi->sequence(), (std::vector<Rpc>{Rpc::NodePublishVolume, Rpc::NodeUnpublishVolume}));
  EXPECT_TRUE(manager->records().empty());
}

TEST_F(VolumeManagerTest, MountingTwiceIsIdempotentAndCallsNothing) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  const auto calls = csi->calls.size();
  auto again = mount("alloc-1", volume("vol1"));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(again.path, target("alloc-1", "vol1"));
  EXPECT_EQ(csi->calls.size(), calls);
}

TEST_F(VolumeManagerTest, StagingIsSharedAndUnstagedOnlyAfterTheLastUser) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-2", volume("vol1")).ok());
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 1);  // already staged: not again
  EXPECT_EQ(csi->count(Rpc::NodePublishVolume), 2);

  ASSERT_TRUE(run(manager->unmount("alloc-1", "vol1")).ok());
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), 1);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 0);  // alloc-2 still uses the staging path
  EXPECT_TRUE(table.is_mounted(staging("vol1")));

  ASSERT_TRUE(run(manager->unmount("alloc-2", "vol1")).ok());
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 1);
  EXPECT_EQ(csi->sequence().back(), Rpc::NodeUnstageVolume);
  EXPECT_TRUE(table.mounted.empty());
  EXPECT_TRUE(manager->records().empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "mnt" / "per-alloc"));
  EXPECT_FALSE(std::filesystem::exists(dir / "mnt" / "staging"));
}

TEST_F(VolumeManagerTest, IntentIsRecordedOnDiskBeforeEachRpc) {
  std::vector<std::string> seen;
  csi->on_call = [&](const FakeCall& call) {
    MountRecordStore disk(dir / "state");  // what a restarted agent would read right now
    ASSERT_TRUE(disk.load().ok());
    auto r = disk.get("alloc-1", "vol1");
    ASSERT_TRUE(r.has_value()) << "no record on disk during " << csi::to_string(call.rpc);
    seen.push_back(std::string(csi::to_string(call.rpc)) + " phase=" + std::string(to_string(r->phase)) +
                   " staged=" + std::string(to_string(r->staged)) + " published=" + std::string(to_string(r->published)));
  };
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(run(manager->unmount("alloc-1", "vol1")).ok());
  const std::vector<std::string> expected{
      "NodeStageVolume phase=mounting staged=pending published=none",
      "NodePublishVolume phase=mounting staged=done published=pending",
      "NodeUnpublishVolume phase=unmounting staged=done published=done",
      // The unpublish is not written before the unstage: one write after both. A crash here
      // makes a restarted agent repeat NodeUnpublishVolume, which is idempotent; the disk never
      // claims less than may be mounted.
      "NodeUnstageVolume phase=unmounting staged=done published=done",
  };
  EXPECT_EQ(seen, expected);
}

TEST_F(VolumeManagerTest, UncertainPublishIsFollowedByUnpublishAndUnstage) {
  csi->fail_next(Rpc::NodePublishVolume, grpc::StatusCode::DEADLINE_EXCEEDED);
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.retryable);
  EXPECT_FALSE(r.cleanup_owed);
  EXPECT_NE(r.error.find("NodePublishVolume"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("vol1"), std::string::npos) << r.error;
  EXPECT_EQ(csi->sequence(), (std::vector<Rpc>{Rpc::NodeStageVolume, Rpc::NodePublishVolume,
                                               Rpc::NodeUnpublishVolume, Rpc::NodeUnstageVolume}));
  EXPECT_TRUE(manager->records().empty());
  EXPECT_TRUE(table.mounted.empty());
}

TEST_F(VolumeManagerTest, UncertainStageIsFollowedByUnstage) {
  csi->fail_next(Rpc::NodeStageVolume, grpc::StatusCode::UNAVAILABLE);
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(csi->sequence(), (std::vector<Rpc>{Rpc::NodeStageVolume, Rpc::NodeUnstageVolume}));
  EXPECT_TRUE(manager->records().empty());
}

// RESOURCE_EXHAUSTED (the node's limit) from NodeStage or NodePublish: the plugin's limits are
// read again (its supervisor fingerprints it now); other failures ask for nothing.
TEST_F(VolumeManagerTest, AStageOrPublishAtTheNodesLimitAsksForItsLimitsAgain) {
  csi->fail_next(Rpc::NodeStageVolume, grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(mount("alloc-1", volume("vol1")).ok());
  EXPECT_TRUE(plugins.exhausted.empty());
  csi->fail_next(Rpc::NodeStageVolume, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_FALSE(mount("alloc-1", volume("vol1")).ok());
  csi->fail_next(Rpc::NodePublishVolume, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_FALSE(mount("alloc-1", volume("vol1")).ok());
  EXPECT_EQ(plugins.exhausted, (std::vector<std::string>{"fake", "fake"}));
}

TEST_F(VolumeManagerTest, FinalPublishErrorIsNotRetryableAndReleasesOnlyTheStaging) {
  csi->fail_next(Rpc::NodePublishVolume, grpc::StatusCode::ALREADY_EXISTS);
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.retryable);
  EXPECT_EQ(csi->sequence(),
            (std::vector<Rpc>{Rpc::NodeStageVolume, Rpc::NodePublishVolume, Rpc::NodeUnstageVolume}));
  EXPECT_TRUE(manager->records().empty());
}

TEST_F(VolumeManagerTest, UndoThatFailsIsFinishedInTheBackgroundWithoutNotifying) {
  csi->fail_next(Rpc::NodePublishVolume, grpc::StatusCode::DEADLINE_EXCEEDED);
  csi->fail_next(Rpc::NodeUnpublishVolume, grpc::StatusCode::UNAVAILABLE, 3);
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.cleanup_owed);
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_EQ(manager->records()[0].phase, MountPhase::unmounting);
  ASSERT_TRUE(pump_until(io, [&] { return manager->records().empty(); }, 10s));
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), 4);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 1);
  EXPECT_TRUE(table.mounted.empty());
  EXPECT_TRUE(notified.empty());
}

TEST_F(VolumeManagerTest, PluginNotRunningIsARetryableMountErrorWithNoRpc) {
  plugins.set_unhealthy("fake");
  auto r = mount("alloc-1", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.retryable);
  EXPECT_NE(r.error.find("not running"), std::string::npos) << r.error;
  EXPECT_TRUE(csi->calls.empty());
  EXPECT_TRUE(manager->records().empty());
}

TEST_F(VolumeManagerTest, BadIdsAreRejectedBeforeAnyRpc) {
  auto r = mount("../../etc", volume("vol1"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("allocation id"), std::string::npos) << r.error;
  auto v = mount("alloc-1", volume("a/b"));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error.find("volume id"), std::string::npos) << v.error;
  auto unknown_mode = volume("vol1");
  unknown_mode.attachment_mode = AttachmentMode::unknown;
  EXPECT_FALSE(mount("alloc-1", unknown_mode).ok());
  EXPECT_TRUE(csi->calls.empty());
  EXPECT_FALSE(run(manager->detach("../x")).ok());
}

TEST_F(VolumeManagerTest, SameVolumeOperationsSerializeAndDifferentVolumesRunInParallel) {
  csi->delay = 30ms;
  int finished = 0;
  for (const char* alloc : {"a1", "a2", "a3"}) {
    for (const char* vol : {"v1", "v2", "v3"}) {
      asio::co_spawn(io, manager->mount(alloc, volume(vol)), [&](std::exception_ptr e, MountResult r) {
        EXPECT_FALSE(e);
        EXPECT_TRUE(r.ok()) << r.error;
        ++finished;
      });
    }
  }
  ASSERT_TRUE(pump_until(io, [&] { return finished == 9; }, 20s));
  EXPECT_EQ(csi->max_in_flight_per_volume, 1);
  EXPECT_GE(csi->max_in_flight_total, 3);
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 3);  // once per volume
  EXPECT_EQ(csi->count(Rpc::NodePublishVolume), 9);

  manager->release("a1", {"v1", "v2", "v3"});
  manager->release("a2", {"v1", "v2", "v3"});
  manager->release("a3", {"v1", "v2", "v3"});
  ASSERT_TRUE(pump_until(io, [&] { return notified.size() == 9; }, 20s));
  EXPECT_EQ(csi->max_in_flight_per_volume, 1);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 3);
  EXPECT_TRUE(table.mounted.empty());
}

TEST_F(VolumeManagerTest, ReleaseReturnsAtOnceRetriesFailuresAndThenTellsTheControlPlane) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  csi->fail_next(Rpc::NodeUnpublishVolume, grpc::StatusCode::UNAVAILABLE, 2);
  csi->fail_next(Rpc::NodeUnstageVolume, grpc::StatusCode::FAILED_PRECONDITION, 1);
  notify_failures = 2;
  const auto start = std::chrono::steady_clock::now();
  manager->release("alloc-1", {"vol1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), 0);  // nothing ran inside release()
  EXPECT_EQ(manager->releases_in_flight(), 1u);
  // The record leaves memory at once and the task ends once its file is gone too.
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1") && manager->releases_in_flight() == 0; }, 10s));
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), 3);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 2);
  EXPECT_EQ(notified.size(), 1u);
  EXPECT_EQ(manager->releases_in_flight(), 0u);
}

TEST_F(VolumeManagerTest, NotFoundOnUnmountCountsAsDone) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  csi->fail_next(Rpc::NodeUnpublishVolume, grpc::StatusCode::NOT_FOUND);
  csi->fail_next(Rpc::NodeUnstageVolume, grpc::StatusCode::NOT_FOUND);
  table.mounted.clear();  // already gone
  auto r = run(manager->unmount("alloc-1", "vol1"));
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(manager->records().empty());
}

TEST_F(VolumeManagerTest, UnpublishOkButStillMountedIsNotTrusted) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  // NOT_FOUND counts as "already unmounted", but the fake leaves the target in the mount table.
  csi->fail_next(Rpc::NodeUnpublishVolume, grpc::StatusCode::NOT_FOUND);
  auto r = run(manager->unmount("alloc-1", "vol1"));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("still mounted"), std::string::npos) << r.error;
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_EQ(manager->records()[0].published, StepState::done);
  EXPECT_EQ(manager->records()[0].unmount_attempts, 1u);
}

TEST_F(VolumeManagerTest, ReleaseWaitsForTheMissingPluginAndIsWokenWhenItIsHealthyAgain) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  manager.reset();  // a manager with a very long backoff: only the wake can make it try again
  auto opts = options();
  opts.unmount_backoff = {.initial = std::chrono::hours(1), .max = std::chrono::hours(1), .jitter = 0};
  manager = make_manager(opts);
  plugins.set_unhealthy("fake");
  manager->release("alloc-1", {"vol1"});
  pump_for(io, 300ms);
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_NE(manager->records()[0].last_error.find("not running"), std::string::npos) << manager->records()[0].last_error;
  EXPECT_TRUE(csi->count(Rpc::NodeUnpublishVolume) == 0);
  const auto woken = std::chrono::steady_clock::now();
  plugins.set_healthy("fake", NodePlugin{csi, true});
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1"); }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - woken, 5s);
}

TEST_F(VolumeManagerTest, OneStuckVolumeNeverHoldsUpTheOthers) {
  std::vector<std::string> vols;
  for (int i = 0; i < 10; ++i) {
    vols.push_back("vol" + std::to_string(i));
    ASSERT_TRUE(mount("alloc-1", volume(vols.back())).ok());
  }
  csi->fail_always(Rpc::NodeUnpublishVolume, grpc::StatusCode::INTERNAL, "ext-vol7");
  manager->release("alloc-1", vols);
  ASSERT_TRUE(pump_until(io, [&] { return notified.size() == 9; }, 10s));
  pump_for(io, 200ms);
  EXPECT_EQ(notified.size(), 9u);
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_EQ(manager->records()[0].volume_id, "vol7");
  EXPECT_GT(manager->records()[0].unmount_attempts, 1u);
  EXPECT_NE(manager->records()[0].last_error.find("INTERNAL"), std::string::npos);
  csi->clear_failures();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol7"); }, 10s));
}

TEST_F(VolumeManagerTest, ShutdownDoesNotWaitForAHungPluginAndResumeFinishesAfterRestart) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-1", volume("vol2")).ok());
  csi->hang(Rpc::NodeUnpublishVolume);
  manager->release("alloc-1", {"vol1", "vol2"});
  pump_for(io, 100ms);
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), 2);  // both in flight, each in its own task
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(run(manager->shutdown(2s)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  manager.reset();

  // The records say where each release stands.
  MountRecordStore disk(dir / "state");
  ASSERT_TRUE(disk.load().ok());
  ASSERT_EQ(disk.all().size(), 2u);
  for (const auto& r : disk.all()) {
    EXPECT_TRUE(r.notify);
    EXPECT_EQ(r.phase, MountPhase::unmounting);
    EXPECT_NE(r.published, StepState::none);
    EXPECT_FALSE(r.last_error.empty());
  }

  csi->hang(Rpc::NodeUnpublishVolume, false);
  manager = make_manager();
  EXPECT_EQ(manager->mounted_allocations().size(), 0u);  // released, not in use
  manager->resume();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1") && released("alloc-1", "vol2"); }, 10s));
  EXPECT_TRUE(table.mounted.empty());
}

TEST_F(VolumeManagerTest, NotificationPendingAtShutdownIsSentAfterResume) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  notify_failures = 1000000;
  manager->release("alloc-1", {"vol1"});
  // Unmounted and recorded so, with only the notification left: the mount table empties before
  // the record's phase is written, and a shutdown between the two leaves an unmount to redo.
  ASSERT_TRUE(pump_until(io, [&] {
    const auto r = manager->records();
    return table.mounted.empty() && r.size() == 1 && r[0].phase == MountPhase::unmounted;
  }, 10s));
  EXPECT_TRUE(run(manager->shutdown(2s)));
  manager = make_manager();
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_EQ(manager->records()[0].phase, MountPhase::unmounted);
  notify_failures = 0;
  const auto unpublishes = csi->count(Rpc::NodeUnpublishVolume);
  manager->resume();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1"); }, 10s));
  EXPECT_EQ(csi->count(Rpc::NodeUnpublishVolume), unpublishes);  // nothing to unmount again
}

TEST_F(VolumeManagerTest, ReleaseOfAVolumeNeverMountedStillTellsTheControlPlane) {
  manager->release("alloc-1", {"vol9"});
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol9"); }, 10s));
  EXPECT_TRUE(csi->calls.empty());
}

TEST_F(VolumeManagerTest, MountAfterReleaseIsRefused) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  csi->fail_always(Rpc::NodeUnpublishVolume, grpc::StatusCode::UNAVAILABLE);
  manager->release("alloc-1", {"vol1"});
  pump_for(io, 50ms);
  auto r = mount("alloc-1", volume("vol1"));  // runs between two unmount attempts
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.retryable);
  EXPECT_NE(r.error.find("released"), std::string::npos) << r.error;
  csi->clear_failures();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1"); }, 10s));
}

TEST_F(VolumeManagerTest, ReleaseAllReleasesEveryRecordedVolumeOfTheAllocation) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-1", volume("vol2")).ok());
  ASSERT_TRUE(mount("alloc-2", volume("vol2")).ok());
  EXPECT_TRUE(run(manager->shutdown(1s)));
  manager = make_manager();  // restart: alloc-1 turned out to be gone
  manager->release_all("alloc-1");
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol1") && released("alloc-1", "vol2"); }, 10s));
  EXPECT_EQ(manager->mounted_allocations(), std::vector<std::string>{"alloc-2"});
  EXPECT_TRUE(table.is_mounted(target("alloc-2", "vol2")));
  EXPECT_TRUE(table.is_mounted(staging("vol2")));
}

TEST_F(VolumeManagerTest, DetachOneAllocationOrAllIsIdempotent) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-2", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-3", volume("vol1")).ok());
  EXPECT_TRUE(run(manager->detach("vol1", "alloc-1")).ok());
  EXPECT_EQ(manager->records().size(), 2u);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 0);
  EXPECT_TRUE(run(manager->detach("vol1", "alloc-1")).ok());  // again: nothing to do
  EXPECT_TRUE(run(manager->detach("vol1")).ok());
  EXPECT_TRUE(manager->records().empty());
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 1);
  EXPECT_TRUE(table.mounted.empty());
  EXPECT_TRUE(run(manager->detach("vol1")).ok());
  EXPECT_TRUE(run(manager->detach("never-here", "alloc-9")).ok());
  EXPECT_TRUE(notified.empty());  // the control plane asked; it hears the answer directly

  ASSERT_TRUE(mount("alloc-4", volume("vol1")).ok());
  csi->fail_next(Rpc::NodeUnpublishVolume, grpc::StatusCode::UNAVAILABLE);
  auto failed = run(manager->detach("vol1"));
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.error.find("UNAVAILABLE"), std::string::npos) << failed.error;
  EXPECT_TRUE(run(manager->detach("vol1")).ok());
}

}  // namespace
}  // namespace mooring::nodeagent
