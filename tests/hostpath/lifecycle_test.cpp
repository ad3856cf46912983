// mooring-hostpath over its socket through the whole volume lifecycle, with real bind mounts
// checked in /proc/self/mountinfo.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <gtest/gtest.h>

#include <thread>

#include "shared/durable/durable_file.hpp"

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    plugin_ = std::make_unique<HostpathPlugin>(dir_);
    ASSERT_NO_FATAL_FAILURE(plugin_->start());
  }
  void TearDown() override {
    plugin_.reset();
    EXPECT_TRUE(dir_.unmount_all());  // cleans up after a failed test too (and the dtor again)
  }

  test::TempDir dir_{"hp-life"};
  std::unique_ptr<HostpathPlugin> plugin_;
};

// errno of creating a file at `path` (0 on success).
int create_file_errno(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

TEST_F(HostpathLifecycle, CreatePublishStageWriteUnwindSnapshotRestoreExpandDelete) {
  auto& p = *plugin_;
  csi::v1::Volume vol;
  ASSERT_TRUE(p.create_volume("data", 4 * kMi, &vol).ok());
  EXPECT_EQ(vol.capacity_bytes(), 4 * kMi);
  const std::filesystem::path vol_dir = vol.volume_context().at("path");
  EXPECT_TRUE(std::filesystem::is_directory(vol_dir));

  ASSERT_TRUE(p.controller_publish(vol.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  const auto staging = dir_.make_dir("staging/data");
  const auto target = dir_ / "pods/alloc1/data";  // the plugin creates the target
  auto st = p.stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(test::is_mounted(staging));
  st = p.publish(vol.volume_id(), staging, target, AM::SINGLE_NODE_WRITER);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const auto mount = test::find_mount(target);
  ASSERT_TRUE(mount.has_value());
  EXPECT_FALSE(mount->read_only());

  test::write_file(target / "hello.txt", "from the workload");
  EXPECT_EQ(test::read_file(vol_dir / "hello.txt"), "from the workload");

  {  // stats see the file and the tracked capacity
    csi::v1::NodeGetVolumeStatsRequest req;
    req.set_volume_id(vol.volume_id());
    req.set_volume_path(target.string());
    csi::v1::NodeGetVolumeStatsResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.node().NodeGetVolumeStats(&ctx, req, &resp).ok());
    ASSERT_GE(resp.usage_size(), 1);
    EXPECT_EQ(resp.usage(0).unit(), csi::v1::VolumeUsage::BYTES);
    EXPECT_EQ(resp.usage(0).total(), 4 * kMi);
    EXPECT_GE(resp.usage(0).used(), 17);
    EXPECT_FALSE(resp.volume_condition().abnormal());
  }

  {  // never delete a directory under a live mount, even without a controller publication
    ASSERT_TRUE(p.controller_unpublish(vol.volume_id(), "node-a").ok());
    const auto del = p.delete_volume(vol.volume_id());
    EXPECT_EQ(del.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(del.error_message().find("node-a"), std::string::npos) << del.error_message();
    ASSERT_TRUE(p.controller_publish(vol.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  }

  ASSERT_TRUE(p.unpublish(vol.volume_id(), target).ok());
  EXPECT_FALSE(test::is_mounted(target));
  EXPECT_FALSE(std::filesystem::exists(target));
  ASSERT_TRUE(p.unstage(vol.volume_id(), staging).ok());
  EXPECT_FALSE(test::is_mounted(staging));
  ASSERT_TRUE(p.controller_unpublish(vol.volume_id(), "node-a").ok());

  // Snapshot, then restore it into a new volume that has the file.
  csi::v1::CreateSnapshotRequest sreq;
  sreq.set_name("data-snap");
  sreq.set_source_volume_id(vol.volume_id());
  csi::v1::CreateSnapshotResponse sresp;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().CreateSnapshot(&ctx, sreq, &sresp).ok());
  }
  EXPECT_TRUE(sresp.snapshot().ready_to_use());
  EXPECT_EQ(sresp.snapshot().source_volume_id(), vol.volume_id());
  EXPECT_EQ(sresp.snapshot().size_bytes(), 4 * kMi);
  test::write_file(vol_dir / "hello.txt", "changed after the snapshot");

  csi::v1::CreateVolumeRequest rreq;
  rreq.set_name("restored");
  *rreq.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  rreq.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(sresp.snapshot().snapshot_id());
  csi::v1::CreateVolumeResponse rresp;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    auto rst = p.controller().CreateVolume(&ctx, rreq, &rresp);
    ASSERT_TRUE(rst.ok()) << rst.error_message();
  }
  const auto& restored = rresp.volume();
  EXPECT_EQ(restored.capacity_bytes(), 4 * kMi);  // the snapshot's size when no range is given
  EXPECT_EQ(restored.content_source().snapshot().snapshot_id(), sresp.snapshot().snapshot_id());
  EXPECT_EQ(test::read_file(std::filesystem::path(restored.volume_context().at("path")) / "hello.txt"),
            "from the workload");

  {  // expand the restored volume; directories need no node-side step
    csi::v1::ControllerExpandVolumeRequest req;
    req.set_volume_id(restored.volume_id());
    req.mutable_capacity_range()->set_required_bytes(8 * kMi);
    csi::v1::ControllerExpandVolumeResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().ControllerExpandVolume(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.capacity_bytes(), 8 * kMi);
    EXPECT_FALSE(resp.node_expansion_required());
  }
  {
    csi::v1::ControllerGetVolumeRequest req;
    req.set_volume_id(restored.volume_id());
    csi::v1::ControllerGetVolumeResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().ControllerGetVolume(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.volume().capacity_bytes(), 8 * kMi);
    EXPECT_EQ(resp.status().published_node_ids_size(), 0);
    EXPECT_FALSE(resp.status().volume_condition().abnormal());
  }

  ASSERT_TRUE(p.delete_volume(vol.volume_id()).ok());
  ASSERT_TRUE(p.delete_volume(restored.volume_id()).ok());
  EXPECT_FALSE(std::filesystem::exists(vol_dir));
  {
    csi::v1::DeleteSnapshotRequest req;
    req.set_snapshot_id(sresp.snapshot().snapshot_id());
    csi::v1::DeleteSnapshotResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().DeleteSnapshot(&ctx, req, &resp).ok());
  }
  csi::v1::ListVolumesResponse list;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(p.controller().ListVolumes(&ctx, {}, &list).ok());
  EXPECT_EQ(list.entries_size(), 0);
}

TEST_F(HostpathLifecycle, ReadOnlyPublishReallyIsReadOnly) {
  auto& p = *plugin_;
  csi::v1::Volume vol;
  ASSERT_TRUE(p.create_volume("ro", kMi, &vol).ok());
  const auto staging = dir_.make_dir("staging");
  ASSERT_TRUE(p.stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());

  const auto rw = dir_ / "rw";
  const auto ro_flag = dir_ / "ro-flag";
  const auto ro_mode = dir_ / "ro-mode";
  ASSERT_TRUE(p.publish(vol.volume_id(), staging, rw, AM::SINGLE_NODE_WRITER).ok());
  auto st = p.publish(vol.volume_id(), staging, ro_flag, AM::SINGLE_NODE_WRITER, /*readonly=*/true);
  ASSERT_TRUE(st.ok()) << st.error_message();

  EXPECT_EQ(create_file_errno(rw / "a"), 0);
  EXPECT_EQ(create_file_errno(ro_flag / "b"), EROFS);
  ASSERT_TRUE(test::find_mount(ro_flag).has_value());
  EXPECT_TRUE(test::find_mount(ro_flag)->read_only());
  EXPECT_TRUE(std::filesystem::exists(ro_flag / "a"));  // same volume, just not writable here

  // A reader-only access mode also mounts read-only, with no readonly flag.
  csi::v1::Volume vol2;
  ASSERT_TRUE(p.create_volume("ro-mode", kMi, &vol2, AM::MULTI_NODE_READER_ONLY).ok());
  const auto staging2 = dir_.make_dir("staging2");
  ASSERT_TRUE(p.stage(vol2.volume_id(), staging2, AM::MULTI_NODE_READER_ONLY).ok());
  ASSERT_TRUE(p.publish(vol2.volume_id(), staging2, ro_mode, AM::MULTI_NODE_READER_ONLY).ok());
  EXPECT_EQ(create_file_errno(ro_mode / "c"), EROFS);

  for (const auto& t : {rw, ro_flag}) EXPECT_TRUE(p.unpublish(vol.volume_id(), t).ok());
  EXPECT_TRUE(p.unpublish(vol2.volume_id(), ro_mode).ok());
  EXPECT_TRUE(p.unstage(vol.volume_id(), staging).ok());
  EXPECT_TRUE(p.unstage(vol2.volume_id(), staging2).ok());
  EXPECT_TRUE(test::mounts_under(dir_.path()).empty());
}

TEST_F(HostpathLifecycle, EveryCallIsIdempotentAndNeverStacksMounts) {
  auto& p = *plugin_;
  csi::v1::Volume a, b;
  ASSERT_TRUE(p.create_volume("same", 2 * kMi, &a).ok());
  ASSERT_TRUE(p.create_volume("same", 2 * kMi, &b).ok());
  EXPECT_EQ(a.volume_id(), b.volume_id());
  const auto& id = a.volume_id();
  const auto staging = dir_.make_dir("staging");
  const auto target = dir_ / "target";

  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(p.controller_publish(id, "node-a", AM::SINGLE_NODE_WRITER).ok());
    ASSERT_TRUE(p.stage(id, staging, AM::SINGLE_NODE_WRITER).ok());
    ASSERT_TRUE(p.publish(id, staging, target, AM::SINGLE_NODE_WRITER).ok());
  }
  EXPECT_EQ(test::mounts_under(staging).size(), 1u);
  EXPECT_EQ(test::mounts_under(target).size(), 1u);

  for (int i = 0; i < 2; ++i) {
    auto st = p.unpublish(id, target);
    EXPECT_TRUE(st.ok()) << "round " << i << ": " << st.error_message();
    st = p.unstage(id, staging);
    EXPECT_TRUE(st.ok()) << "round " << i << ": " << st.error_message();
    EXPECT_TRUE(p.controller_unpublish(id, "node-a").ok());
  }
  EXPECT_TRUE(test::mounts_under(dir_.path()).empty());
  // Unpublish/unstage of paths that never existed, and of a volume that never existed.
  EXPECT_TRUE(p.unpublish(id, dir_ / "never").ok());
  EXPECT_TRUE(p.unstage(id, dir_ / "never-staged").ok());
  EXPECT_TRUE(p.controller_unpublish("vol-unknown", "node-a").ok());
  EXPECT_TRUE(p.delete_volume(id).ok());
  EXPECT_TRUE(p.delete_volume(id).ok());
}

// Node calls of different volumes run concurrently (per-path locks, shared record writes) and
// controller calls append to one journal: eight volumes through the whole cycle at once, five
// rounds each, must all land, leave no mount and no record behind, and survive a restart.
TEST_F(HostpathLifecycle, ConcurrentLifecyclesOfManyVolumesAllLandAndLeaveNothingBehind) {
  auto& p = *plugin_;
  constexpr int kThreads = 8, kRounds = 5;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](std::string_view step, const grpc::Status& st) {
        if (failures[t].empty()) failures[t] = std::string(step) + ": " + st.error_message();
      };
      for (int r = 0; r < kRounds; ++r) {
        csi::v1::Volume vol;
        const auto name = "v" + std::to_string(t) + "-" + std::to_string(r);
        if (auto st = p.create_volume(name, kMi, &vol); !st.ok()) return fail("create " + name, st);
        const auto& id = vol.volume_id();
        const auto staging = dir_ / ("staging/" + name);
        const auto target = dir_ / ("pods/" + name + "/data");
        std::filesystem::create_directories(staging);
        if (auto st = p.controller_publish(id, "node-a", AM::SINGLE_NODE_WRITER); !st.ok()) return fail("cpublish", st);
        if (auto st = p.stage(id, staging, AM::SINGLE_NODE_WRITER); !st.ok()) return fail("stage", st);
        if (auto st = p.publish(id, staging, target, AM::SINGLE_NODE_WRITER); !st.ok()) return fail("publish", st);
        test::write_file(target / "f", name);
        if (auto st = p.unpublish(id, target); !st.ok()) return fail("unpublish", st);
        if (auto st = p.unstage(id, staging); !st.ok()) return fail("unstage", st);
        if (auto st = p.controller_unpublish(id, "node-a"); !st.ok()) return fail("cunpublish", st);
        if (r % 2 == 1) {
          if (auto st = p.delete_volume(id); !st.ok()) return fail("delete", st);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_TRUE(test::mounts_under(dir_.path()).empty());
  // The node's records are empty, and the catalogue holds the volumes kept (rounds 0, 2, 4),
  // none published; the same after a restart, which reads the journal.
  for (int pass = 0; pass < 2; ++pass) {
    std::error_code ec;
    const auto node_record = durable::read_durable(p.data_dir() / "nodes" / "node-a.json", ec);
    ASSERT_TRUE(node_record.has_value()) << ec.message();
    const auto node_json = nlohmann::json::parse(*node_record);
    EXPECT_TRUE(node_json.at("staged").empty()) << *node_record;
    EXPECT_TRUE(node_json.at("published").empty()) << *node_record;
    csi::v1::ListVolumesRequest req;
    csi::v1::ListVolumesResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().ListVolumes(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.entries_size(), kThreads * 3);
    for (const auto& e : resp.entries()) EXPECT_EQ(e.status().published_node_ids_size(), 0) << e.volume().volume_id();
    if (pass == 0) p.restart();
  }
}

TEST_F(HostpathLifecycle, CloneFromVolumeCopiesContentAndKeepsSourceIndependent) {
  auto& p = *plugin_;
  csi::v1::Volume src;
  ASSERT_TRUE(p.create_volume("src", 2 * kMi, &src).ok());
  const std::filesystem::path src_dir = src.volume_context().at("path");
  test::write_file(src_dir / "f", "v1");
  csi::v1::CreateVolumeRequest req;
  req.set_name("clone");
  req.mutable_capacity_range()->set_required_bytes(kMi);  // smaller than the source
  *req.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  req.mutable_volume_content_source()->mutable_volume()->set_volume_id(src.volume_id());
  csi::v1::CreateVolumeResponse resp;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_EQ(p.controller().CreateVolume(&ctx, req, &resp).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  }
  req.mutable_capacity_range()->set_required_bytes(2 * kMi);
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(p.controller().CreateVolume(&ctx, req, &resp).ok());
  const std::filesystem::path clone_dir = resp.volume().volume_context().at("path");
  EXPECT_EQ(test::read_file(clone_dir / "f"), "v1");
  test::write_file(clone_dir / "f", "v2");
  EXPECT_EQ(test::read_file(src_dir / "f"), "v1");
}

}  // namespace
}  // namespace mooring::hostpath
