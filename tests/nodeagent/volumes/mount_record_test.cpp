#include "services/nodeagent/volumes/mount_record.hpp"
#include "services/nodeagent/volumes/mount_record_store.hpp"

#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace mooring::nodeagent {
namespace {

MountRecord sample() {
  MountRecord r;
  r.alloc_id = "alloc-1";
  r.volume_id = "vol[2]";
  r.plugin_id = "hostpath";
  r.external_id = "ext/with:odd chars";
  r.usage = "rw-file-system-single-node-writer";
  r.access_mode = domain::AccessMode::single_node_writer;
  r.attachment_mode = domain::AttachmentMode::file_system;
  r.staging_path = "/m/staging/vol[2]/rw-file-system-single-node-writer";
  r.target_path = "/m/per-alloc/alloc-1/vol[2]/rw-file-system-single-node-writer";
  r.phase = MountPhase::unmounting;
  r.staged = StepState::done;
  r.published = StepState::pending;
  r.notify = true;
  r.unmount_attempts = 3;
  r.last_error = "NodeUnpublishVolume failed";
  r.updated_unix_ms = 1234;
  return r;
}

TEST(MountRecordTest, RoundTripsThroughJson) {
  const auto r = sample();
  auto back = decode_mount_record(encode(r));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, r);
}

TEST(MountRecordTest, RejectsUnknownStatesAndGarbage) {
  EXPECT_FALSE(decode_mount_record("not json").ok());
  EXPECT_FALSE(decode_mount_record("[]").ok());
  auto text = encode(sample());
  auto bad = text;
  bad.replace(bad.find("\"unmounting\""), 12, "\"exploded\"");
  EXPECT_FALSE(decode_mount_record(bad).ok());
}

TEST(MountRecordStoreTest, PersistsAcrossInstancesAndRemovesTheAllocationDirWithItsLastRecord) {
  test::TempDir dir("vol-records");
  {
    MountRecordStore store(dir / "records");
    ASSERT_TRUE(store.load().ok());
    auto a = sample();
    auto b = sample();
    b.volume_id = "other";
    ASSERT_TRUE(store.put(a).ok());
    ASSERT_TRUE(store.put(b).ok());
    EXPECT_GT(a.updated_unix_ms, 1234);
  }
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  ASSERT_EQ(store.all().size(), 2u);
  EXPECT_EQ(store.for_volume("vol[2]").size(), 1u);
  EXPECT_EQ(store.for_alloc("alloc-1").size(), 2u);
  EXPECT_EQ(store.get("alloc-1", "vol[2]")->last_error, "NodeUnpublishVolume failed");
  ASSERT_TRUE(store.remove("alloc-1", "vol[2]").ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "records" / "alloc-1"));
  ASSERT_TRUE(store.remove("alloc-1", "other").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-1"));
  EXPECT_TRUE(store.remove("alloc-1", "other").ok());  // already gone
}

TEST(MountRecordStoreTest, NotifyIsStickyUntilTheRecordIsRemoved) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  auto r = sample();
  r.notify = false;
  ASSERT_TRUE(store.put(r).ok());
  auto marked = r;
  marked.notify = true;
  ASSERT_TRUE(store.put(marked).ok());
  auto stale = r;  // an operation holding a copy from before the release
  stale.phase = MountPhase::mounted;
  ASSERT_TRUE(store.put(stale).ok());
  EXPECT_TRUE(stale.notify);
  EXPECT_TRUE(store.get(r.alloc_id, r.volume_id)->notify);
}

TEST(MountRecordStoreTest, BadIdsAreRefusedAndUnreadableFilesLeftInPlace) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  auto r = sample();
  r.alloc_id = "../escape";
  EXPECT_FALSE(store.put(r).ok());
  std::filesystem::create_directories(dir / "records" / "alloc-9");
  test::write_file(dir / "records" / "alloc-9" / "vol.json", "{broken");
  test::write_file(dir / "records" / "alloc-9" / "vol2.json.tmp", "half a write");
  ASSERT_TRUE(store.load().ok());
  EXPECT_TRUE(store.all().empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "records" / "alloc-9" / "vol.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-9" / "vol2.json.tmp"));
}

}  // namespace
}  // namespace mooring::nodeagent
