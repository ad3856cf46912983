// mooring-hostpath answers each error condition the CSI spec's per-RPC tables name with the code
// the spec gives it, one test per condition (spec v1.12, "<RPC> Errors"). The three the
// Kubernetes conformance suite (csi-sanity) checks with a relative "some/path" are here as it
// sends them. Missing required fields are the table test in controller_rules_test.cpp.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathSpecErrors : public PluginTest {
 protected:
  HostpathSpecErrors() : PluginTest("hp-spec") {}
  void SetUp() override { MOORING_REQUIRE_ROOT(); }
  // A volume created, staged at dir/staging and published at dir/target (as csi-sanity does).
  std::string published_volume(const std::string& name, AM::Mode mode = AM::SINGLE_NODE_WRITER) {
    csi::v1::Volume vol;
    EXPECT_TRUE(plugin_->create_volume(name, kMi, &vol, mode).ok());
    EXPECT_TRUE(plugin_->stage(vol.volume_id(), staging(), mode).ok());
    EXPECT_TRUE(plugin_->publish(vol.volume_id(), staging(), target(), mode).ok());
    return vol.volume_id();
  }
  std::filesystem::path staging() const { return dir_ / "staging"; }
  std::filesystem::path target() const { return dir_ / "target"; }

  grpc::Status stats(const std::string& volume_id, const std::string& path) {
    csi::v1::NodeGetVolumeStatsRequest r;
    r.set_volume_id(volume_id);
    r.set_volume_path(path);
    csi::v1::NodeGetVolumeStatsResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    return plugin_->node().NodeGetVolumeStats(&ctx, r, &o);
  }
  grpc::Status node_expand(const std::string& volume_id, const std::string& path, std::int64_t required,
                           std::int64_t limit = 0, const csi::v1::VolumeCapability* cap = nullptr) {
    csi::v1::NodeExpandVolumeRequest r;
    r.set_volume_id(volume_id);
    r.set_volume_path(path);
    r.mutable_capacity_range()->set_required_bytes(required);
    r.mutable_capacity_range()->set_limit_bytes(limit);
    if (cap) *r.mutable_volume_capability() = *cap;
    csi::v1::NodeExpandVolumeResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    return plugin_->node().NodeExpandVolume(&ctx, r, &o);
  }
  grpc::Status create_from_snapshot(const std::string& name, const std::string& snapshot_id, std::int64_t bytes) {
    csi::v1::CreateVolumeRequest r;
    r.set_name(name);
    r.mutable_capacity_range()->set_required_bytes(bytes);
    *r.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
    r.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(snapshot_id);
    csi::v1::CreateVolumeResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    return plugin_->controller().CreateVolume(&ctx, r, &o);
  }
  grpc::Status create_snapshot(const std::string& name, const std::string& source, std::string* id = nullptr) {
    csi::v1::CreateSnapshotRequest r;
    r.set_name(name);
    r.set_source_volume_id(source);
    csi::v1::CreateSnapshotResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    auto st = plugin_->controller().CreateSnapshot(&ctx, r, &o);
    if (id) *id = o.snapshot().snapshot_id();
    return st;
  }
};

// --- NodeGetVolumeStats: "volume does not exist on specified volume_path" is NOT_FOUND ---

TEST_F(HostpathSpecErrors, NodeGetVolumeStatsForAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto st = stats("vol-unknown", "some/path");  // csi-sanity's request
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("vol-unknown"), std::string::npos) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodeGetVolumeStatsWhereTheVolumeIsNotPublishedIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto id = published_volume("stats");
  EXPECT_EQ(stats(id, "some/path").error_code(), StatusCode::NOT_FOUND);  // csi-sanity's request
  const auto elsewhere = dir_.make_dir("elsewhere");
  const auto st = stats(id, elsewhere.string());  // exists, but the volume is not there
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find(elsewhere.string()), std::string::npos) << st.error_message();
  EXPECT_TRUE(stats(id, target().string()).ok());
}

TEST_F(HostpathSpecErrors, NodeGetVolumeStatsWithoutAVolumeIdIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(stats("", "some/path").error_code(), StatusCode::INVALID_ARGUMENT);  // csi-sanity's request
}

// --- NodeExpandVolume ---

TEST_F(HostpathSpecErrors, NodeExpandVolumeForAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto st = node_expand("vol-unknown", "some/path", kMi);  // csi-sanity's request
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodeExpandVolumeWhereTheVolumeIsNotStagedOrPublishedIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("unstaged", kMi, &vol).ok());
  // An existing directory is not where the volume is: only staged or published paths expand.
  const auto st = node_expand(vol.volume_id(), dir_.make_dir("elsewhere").string(), kMi);
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodeExpandVolumeWithACapabilityTheVolumeLacksIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto id = published_volume("expand-block");
  const auto block = block_capability(AM::SINGLE_NODE_WRITER);
  EXPECT_EQ(node_expand(id, target().string(), kMi, 0, &block).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathSpecErrors, NodeExpandVolumeWithALimitBelowTheVolumeIsOutOfRange) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto id = published_volume("expand-limit");
  const auto st = node_expand(id, target().string(), 0, kMi / 2);
  EXPECT_EQ(st.error_code(), StatusCode::OUT_OF_RANGE) << st.error_message();
  EXPECT_TRUE(node_expand(id, target().string(), kMi).ok());
}

// --- NodeStageVolume ---

TEST_F(HostpathSpecErrors, NodeStageVolumeWithACapabilityTheVolumeLacksIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("stage-block", kMi, &vol).ok());
  const auto st = plugin_->stage(vol.volume_id(), staging(), block_capability(AM::SINGLE_NODE_WRITER));
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_FALSE(test::is_mounted(staging()));
}

TEST_F(HostpathSpecErrors, NodeStageVolumeStagedWithAnotherAccessModeIsAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("stage-twice", kMi, &vol, AM::MULTI_NODE_MULTI_WRITER).ok());
  ASSERT_TRUE(plugin_->stage(vol.volume_id(), staging(), AM::MULTI_NODE_MULTI_WRITER).ok());
  EXPECT_EQ(plugin_->stage(vol.volume_id(), staging(), AM::MULTI_NODE_READER_ONLY).error_code(),
            StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(plugin_->stage(vol.volume_id(), staging(), AM::MULTI_NODE_MULTI_WRITER).ok());
}

TEST_F(HostpathSpecErrors, AVolumeIdThisPluginCouldNotHaveMadeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto st = plugin_->stage("../escape", staging(), AM::SINGLE_NODE_WRITER);
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_FALSE(std::filesystem::exists(plugin_->data_dir() / "escape"));
}

// --- NodeUnstageVolume: "volume does not exist" is NOT_FOUND; not staged is OK ---

TEST_F(HostpathSpecErrors, NodeUnstageVolumeOfAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto st = plugin_->unstage("vol-unknown", staging());
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodeUnstageVolumeOfAKnownVolumeNotStagedThereIsOk) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("not-staged", kMi, &vol).ok());
  EXPECT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());
}

// --- NodePublishVolume ---

TEST_F(HostpathSpecErrors, NodePublishVolumeWithoutAStagingPathIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("no-staging", kMi, &vol).ok());
  csi::v1::NodePublishVolumeRequest r;
  r.set_volume_id(vol.volume_id());
  r.set_target_path(target().string());
  *r.mutable_volume_capability() = mount_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::NodePublishVolumeResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  const auto st = plugin_->node().NodePublishVolume(&ctx, r, &o);
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("NodeStageVolume"), std::string::npos) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodePublishVolumeWithACapabilityTheVolumeLacksIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("publish-block", kMi, &vol).ok());
  ASSERT_TRUE(plugin_->stage(vol.volume_id(), staging(), AM::SINGLE_NODE_WRITER).ok());
  EXPECT_EQ(plugin_->publish(vol.volume_id(), staging(), target(), block_capability(AM::SINGLE_NODE_WRITER)).error_code(),
            StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(test::is_mounted(target()));
}

TEST_F(HostpathSpecErrors, NodePublishVolumeOfAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(plugin_->publish("vol-unknown", staging(), target(), AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::NOT_FOUND);
}

TEST_F(HostpathSpecErrors, NodePublishVolumeNotYetStagedIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("unstaged", kMi, &vol).ok());
  EXPECT_EQ(plugin_->publish(vol.volume_id(), staging(), target(), AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::FAILED_PRECONDITION);
}

TEST_F(HostpathSpecErrors, NodePublishVolumeAtTheSameTargetWithAnotherReadonlyFlagIsAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto id = published_volume("republish");
  EXPECT_EQ(plugin_->publish(id, staging(), target(), AM::SINGLE_NODE_WRITER, true).error_code(),
            StatusCode::ALREADY_EXISTS);
}

TEST_F(HostpathSpecErrors, NodePublishVolumeOfASingleWriterVolumeAtASecondTargetIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto id = published_volume("one-writer", AM::SINGLE_NODE_SINGLE_WRITER);
  const auto st = plugin_->publish(id, staging(), dir_ / "target2", AM::SINGLE_NODE_SINGLE_WRITER);
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find(target().string()), std::string::npos) << st.error_message();
  EXPECT_FALSE(test::is_mounted(dir_ / "target2"));
  // The same target again is idempotent; once unpublished, another target may have it.
  EXPECT_TRUE(plugin_->publish(id, staging(), target(), AM::SINGLE_NODE_SINGLE_WRITER).ok());
  ASSERT_TRUE(plugin_->unpublish(id, target()).ok());
  EXPECT_TRUE(plugin_->publish(id, staging(), dir_ / "target2", AM::SINGLE_NODE_SINGLE_WRITER).ok());
}

TEST_F(HostpathSpecErrors, NodePublishVolumeOfASingleNodeWriterVolumeAtASecondTargetIsAllowed) {
  ASSERT_NO_FATAL_FAILURE(start());
  // SINGLE_NODE_WRITER predates the single/multi writer split; orchestrators give several
  // workloads on one node their own target (Kubernetes' ReadWriteOnce), so it stays allowed.
  const auto id = published_volume("node-writer");
  EXPECT_TRUE(plugin_->publish(id, staging(), dir_ / "target2", AM::SINGLE_NODE_WRITER).ok());
}

// --- NodeUnpublishVolume: "volume does not exist" is NOT_FOUND; not published is OK ---

TEST_F(HostpathSpecErrors, NodeUnpublishVolumeOfAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto st = plugin_->unpublish("vol-unknown", target());
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
}

TEST_F(HostpathSpecErrors, NodeUnpublishVolumeOfAKnownVolumeNotPublishedThereIsOk) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("not-published", kMi, &vol).ok());
  EXPECT_TRUE(plugin_->unpublish(vol.volume_id(), target()).ok());
}

// --- CreateVolume ---

TEST_F(HostpathSpecErrors, CreateVolumeSmallerThanItsSourceSnapshotIsOutOfRange) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume src;
  ASSERT_TRUE(plugin_->create_volume("src", 2 * kMi, &src).ok());
  std::string snap;
  ASSERT_TRUE(create_snapshot("snap", src.volume_id(), &snap).ok());
  const auto st = create_from_snapshot("restore", snap, kMi);
  EXPECT_EQ(st.error_code(), StatusCode::OUT_OF_RANGE) << st.error_message();
  EXPECT_TRUE(create_from_snapshot("restore", snap, 2 * kMi).ok());
}

TEST_F(HostpathSpecErrors, CreateVolumeFromAMissingSnapshotIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(create_from_snapshot("restore", "snap-0000000000000000", kMi).error_code(), StatusCode::NOT_FOUND);
}

// --- CreateSnapshot ---

TEST_F(HostpathSpecErrors, CreateSnapshotWithoutSpaceIsResourceExhaustedAndLeavesNoCopy) {
  // The data dir on a 4 MiB tmpfs: a 3 MiB volume cannot be copied next to itself. (--capacity
  // lets the pool accounting pass: the space the copy needs is what runs out.)
  const auto data = dir_.make_dir("data");
  ASSERT_EQ(::mount("tmpfs", data.c_str(), "tmpfs", 0, "size=4m"), 0) << "mount tmpfs: " << std::strerror(errno);
  ASSERT_NO_FATAL_FAILURE(start({"node-a", "monolith", {"--capacity", "100Mi"}}));
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("full", 3 * kMi, &vol).ok());
  test::write_file(std::filesystem::path(vol.volume_context().at("path")) / "data", std::string(3 * kMi, 'x'));
  const auto st = create_snapshot("snap", vol.volume_id());
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(data / "snapshots", ec)) << ec.message();
  // A volume cloned from it is refused the same way, and leaves no directory behind.
  csi::v1::CreateVolumeRequest r;
  r.set_name("clone");
  r.mutable_capacity_range()->set_required_bytes(3 * kMi);
  *r.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  r.mutable_volume_content_source()->mutable_volume()->set_volume_id(vol.volume_id());
  csi::v1::CreateVolumeResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().CreateVolume(&ctx, r, &o).error_code(), StatusCode::RESOURCE_EXHAUSTED);
  std::size_t volumes = 0;
  for (const auto& e : std::filesystem::directory_iterator(data / "volumes")) volumes += e.is_directory() ? 1 : 0;
  EXPECT_EQ(volumes, 1u);
}

TEST_F(HostpathSpecErrors, CreateSnapshotOfTheSameNameForAnotherVolumeIsAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume a, b;
  ASSERT_TRUE(plugin_->create_volume("a", kMi, &a).ok());
  ASSERT_TRUE(plugin_->create_volume("b", kMi, &b).ok());
  ASSERT_TRUE(create_snapshot("snap", a.volume_id()).ok());
  EXPECT_TRUE(create_snapshot("snap", a.volume_id()).ok());
  EXPECT_EQ(create_snapshot("snap", b.volume_id()).error_code(), StatusCode::ALREADY_EXISTS);
}

// --- ValidateVolumeCapabilities, ControllerExpandVolume, ListSnapshots ---

TEST_F(HostpathSpecErrors, ValidateVolumeCapabilitiesOfAnUnknownVolumeIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::ValidateVolumeCapabilitiesRequest r;
  r.set_volume_id("vol-unknown");
  *r.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::ValidateVolumeCapabilitiesResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().ValidateVolumeCapabilities(&ctx, r, &o).error_code(), StatusCode::NOT_FOUND);
}

TEST_F(HostpathSpecErrors, ControllerExpandVolumeWithACapabilityTheVolumeLacksIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("cexpand", kMi, &vol).ok());
  csi::v1::ControllerExpandVolumeRequest r;
  r.set_volume_id(vol.volume_id());
  r.mutable_capacity_range()->set_required_bytes(2 * kMi);
  *r.mutable_volume_capability() = block_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::ControllerExpandVolumeResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().ControllerExpandVolume(&ctx, r, &o).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathSpecErrors, ControllerExpandVolumeWithALimitBelowTheVolumeIsOutOfRange) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("cshrink", 2 * kMi, &vol).ok());
  csi::v1::ControllerExpandVolumeRequest r;
  r.set_volume_id(vol.volume_id());
  r.mutable_capacity_range()->set_limit_bytes(kMi);
  csi::v1::ControllerExpandVolumeResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().ControllerExpandVolume(&ctx, r, &o).error_code(), StatusCode::OUT_OF_RANGE);
}

TEST_F(HostpathSpecErrors, ListSnapshotsWithABadStartingTokenIsAborted) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::ListSnapshotsRequest r;
  r.set_starting_token("not-a-token");
  csi::v1::ListSnapshotsResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().ListSnapshots(&ctx, r, &o).error_code(), StatusCode::ABORTED);
}

TEST_F(HostpathSpecErrors, ControllerUnpublishVolumeOfAnUnknownVolumeIsOk) {
  ASSERT_NO_FATAL_FAILURE(start());
  // "cannot be found and can be safely regarded as unpublished": OK, not NOT_FOUND.
  EXPECT_TRUE(plugin_->controller_unpublish("vol-unknown", "node-a").ok());
}

}  // namespace
}  // namespace mooring::hostpath
