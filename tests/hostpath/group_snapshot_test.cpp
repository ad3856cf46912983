// mooring-hostpath's GroupController: a group snapshot copies every member in one catalogue
// transaction, each member restores like any snapshot, the group is idempotent by name, and each
// error condition of the spec's group snapshot tables answers with its code.
#include <set>

#include <gtest/gtest.h>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
namespace fs = std::filesystem;
constexpr std::int64_t kMi = 1 << 20;

class HostpathGroupSnapshot : public PluginTest {
 protected:
  HostpathGroupSnapshot() : PluginTest("hp-group") {}
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    ASSERT_NO_FATAL_FAILURE(start());
  }

  // A volume holding `content` in its file "data".
  std::string volume(const std::string& name, const std::string& content) {
    csi::v1::Volume vol;
    EXPECT_TRUE(plugin_->create_volume(name, kMi, &vol).ok());
    test::write_file(fs::path(vol.volume_context().at("path")) / "data", content);
    paths_[vol.volume_id()] = vol.volume_context().at("path");
    return vol.volume_id();
  }
  grpc::Status create(const std::string& name, const std::vector<std::string>& sources,
                      csi::v1::VolumeGroupSnapshot* out = nullptr) {
    csi::v1::CreateVolumeGroupSnapshotRequest r;
    r.set_name(name);
    for (const auto& s : sources) r.add_source_volume_ids(s);
    csi::v1::CreateVolumeGroupSnapshotResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    auto st = plugin_->group().CreateVolumeGroupSnapshot(&ctx, r, &o);
    if (out) *out = o.group_snapshot();
    return st;
  }
  grpc::Status remove(const std::string& group_id, const std::vector<std::string>& snapshot_ids) {
    csi::v1::DeleteVolumeGroupSnapshotRequest r;
    r.set_group_snapshot_id(group_id);
    for (const auto& s : snapshot_ids) r.add_snapshot_ids(s);
    csi::v1::DeleteVolumeGroupSnapshotResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    return plugin_->group().DeleteVolumeGroupSnapshot(&ctx, r, &o);
  }
  grpc::Status get(const std::string& group_id, const std::vector<std::string>& snapshot_ids,
                   csi::v1::VolumeGroupSnapshot* out = nullptr) {
    csi::v1::GetVolumeGroupSnapshotRequest r;
    r.set_group_snapshot_id(group_id);
    for (const auto& s : snapshot_ids) r.add_snapshot_ids(s);
    csi::v1::GetVolumeGroupSnapshotResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    auto st = plugin_->group().GetVolumeGroupSnapshot(&ctx, r, &o);
    if (out) *out = o.group_snapshot();
    return st;
  }
  static std::vector<std::string> ids(const csi::v1::VolumeGroupSnapshot& g) {
    std::vector<std::string> out;
    for (const auto& s : g.snapshots()) out.push_back(s.snapshot_id());
    return out;
  }
  // A new volume restored from a snapshot; its directory.
  fs::path restore(const std::string& name, const std::string& snapshot_id) {
    csi::v1::CreateVolumeRequest r;
    r.set_name(name);
    *r.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
    r.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(snapshot_id);
    csi::v1::CreateVolumeResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    auto st = plugin_->controller().CreateVolume(&ctx, r, &o);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return o.volume().volume_context().at("path");
  }
  std::size_t snapshot_dirs() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(plugin_->data_dir() / "snapshots")) n += e.is_directory() ? 1 : 0;
    return n;
  }

  std::map<std::string, std::string> paths_;
};

TEST_F(HostpathGroupSnapshot, AdvertisesTheGroupControllerServiceAndItsRpc) {
  csi::v1::GetPluginCapabilitiesResponse caps;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(plugin_->identity().GetPluginCapabilities(&ctx, {}, &caps).ok());
  std::set<int> services;
  for (const auto& c : caps.capabilities())
    if (c.has_service()) services.insert(c.service().type());
  EXPECT_TRUE(services.contains(csi::v1::PluginCapability::Service::GROUP_CONTROLLER_SERVICE));

  csi::v1::GroupControllerGetCapabilitiesResponse group;
  grpc::ClientContext ctx2;
  set_deadline(ctx2);
  ASSERT_TRUE(plugin_->group().GroupControllerGetCapabilities(&ctx2, {}, &group).ok());
  ASSERT_EQ(group.capabilities_size(), 1);
  EXPECT_EQ(group.capabilities(0).rpc().type(),
            csi::v1::GroupControllerServiceCapability::RPC::CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
}

TEST_F(HostpathGroupSnapshot, EveryMemberIsCopiedAtOnePointInTimeAndRestoresThatData) {
  const auto a = volume("a", "a-before");
  const auto b = volume("b", "b-before");
  csi::v1::VolumeGroupSnapshot g;
  ASSERT_TRUE(create("nightly", {a, b}, &g).ok());
  ASSERT_EQ(g.snapshots_size(), 2);
  EXPECT_FALSE(g.group_snapshot_id().empty());
  EXPECT_TRUE(g.ready_to_use());
  std::map<std::string, std::string> by_source;
  for (const auto& s : g.snapshots()) {
    EXPECT_EQ(s.group_snapshot_id(), g.group_snapshot_id());
    EXPECT_EQ(s.creation_time().seconds(), g.creation_time().seconds());
    EXPECT_EQ(s.creation_time().nanos(), g.creation_time().nanos());
    EXPECT_TRUE(s.ready_to_use());
    by_source[s.source_volume_id()] = s.snapshot_id();
  }
  ASSERT_EQ(by_source.size(), 2u);

  test::write_file(fs::path(paths_[a]) / "data", "a-after");
  test::write_file(fs::path(paths_[b]) / "data", "b-after");
  EXPECT_EQ(test::read_file(restore("ra", by_source[a]) / "data"), "a-before");
  EXPECT_EQ(test::read_file(restore("rb", by_source[b]) / "data"), "b-before");

  // ListSnapshots shows the members with their group.
  csi::v1::ListSnapshotsResponse listed;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(plugin_->controller().ListSnapshots(&ctx, {}, &listed).ok());
  ASSERT_EQ(listed.entries_size(), 2);
  for (const auto& e : listed.entries()) EXPECT_EQ(e.snapshot().group_snapshot_id(), g.group_snapshot_id());
}

TEST_F(HostpathGroupSnapshot, TheSameNameAndSourcesAnswerTheSameGroupInAnyOrder) {
  const auto a = volume("a", "1");
  const auto b = volume("b", "2");
  csi::v1::VolumeGroupSnapshot first, again;
  ASSERT_TRUE(create("g", {a, b}, &first).ok());
  ASSERT_TRUE(create("g", {b, a}, &again).ok());
  EXPECT_EQ(again.group_snapshot_id(), first.group_snapshot_id());
  EXPECT_EQ(ids(again), ids(first));
  EXPECT_EQ(snapshot_dirs(), 2u);
}

TEST_F(HostpathGroupSnapshot, TheSameNameWithOtherSourcesIsAlreadyExists) {
  const auto a = volume("a", "1");
  const auto b = volume("b", "2");
  ASSERT_TRUE(create("g", {a, b}).ok());
  const auto st = create("g", {a});
  EXPECT_EQ(st.error_code(), StatusCode::ALREADY_EXISTS) << st.error_message();
}

TEST_F(HostpathGroupSnapshot, AnEmptyNameOrNoSourcesOrARepeatedSourceIsInvalidArgument) {
  const auto a = volume("a", "1");
  EXPECT_EQ(create("", {a}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create("g", {}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create("g", {a, a}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create("g", {a, ""}).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathGroupSnapshot, AnUnknownSourceVolumeIsNotFoundAndCopiesNothing) {
  const auto a = volume("a", "1");
  const auto st = create("g", {a, "vol-0000000000000000"});
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_EQ(snapshot_dirs(), 0u);
}

TEST_F(HostpathGroupSnapshot, DeleteChecksTheSnapshotIdsThenRemovesEveryMemberAndIsIdempotent) {
  const auto a = volume("a", "1");
  const auto b = volume("b", "2");
  csi::v1::VolumeGroupSnapshot g;
  ASSERT_TRUE(create("g", {a, b}, &g).ok());
  auto st = remove(g.group_snapshot_id(), {ids(g).front()});
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_EQ(remove(g.group_snapshot_id(), {}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(snapshot_dirs(), 2u);  // a refused delete keeps the whole group
  EXPECT_EQ(remove("", ids(g)).error_code(), StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(remove(g.group_snapshot_id(), ids(g)).ok());
  EXPECT_EQ(snapshot_dirs(), 0u);
  EXPECT_EQ(get(g.group_snapshot_id(), ids(g)).error_code(), StatusCode::NOT_FOUND);
  EXPECT_TRUE(remove(g.group_snapshot_id(), ids(g)).ok());  // already gone: OK
  // The name is free again.
  EXPECT_TRUE(create("g", {a}).ok());
}

TEST_F(HostpathGroupSnapshot, AMemberIsDeletedOnlyWithItsGroup) {
  const auto a = volume("a", "1");
  csi::v1::VolumeGroupSnapshot g;
  ASSERT_TRUE(create("g", {a}, &g).ok());
  csi::v1::DeleteSnapshotRequest r;
  r.set_snapshot_id(ids(g).front());
  csi::v1::DeleteSnapshotResponse o;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().DeleteSnapshot(&ctx, r, &o).error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(snapshot_dirs(), 1u);
}

TEST_F(HostpathGroupSnapshot, GetAnswersTheGroupAndChecksItsSnapshotIds) {
  const auto a = volume("a", "1");
  const auto b = volume("b", "2");
  csi::v1::VolumeGroupSnapshot g, got;
  ASSERT_TRUE(create("g", {a, b}, &g).ok());
  ASSERT_TRUE(get(g.group_snapshot_id(), ids(g), &got).ok());
  EXPECT_EQ(got.group_snapshot_id(), g.group_snapshot_id());
  EXPECT_EQ(ids(got), ids(g));
  EXPECT_EQ(get(g.group_snapshot_id(), {ids(g).front()}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(get("group-0000000000000000", {}).error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(get("", {}).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathGroupSnapshot, AGroupSurvivesAPluginRestart) {
  const auto a = volume("a", "1");
  const auto b = volume("b", "2");
  csi::v1::VolumeGroupSnapshot g, got;
  ASSERT_TRUE(create("g", {a, b}, &g).ok());
  ASSERT_NO_FATAL_FAILURE(plugin_->restart());
  ASSERT_TRUE(get(g.group_snapshot_id(), ids(g), &got).ok());
  EXPECT_EQ(ids(got), ids(g));
  EXPECT_EQ(got.creation_time().nanos(), g.creation_time().nanos());
}

}  // namespace
}  // namespace mooring::hostpath
