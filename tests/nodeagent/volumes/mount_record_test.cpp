#include "services/nodeagent/volumes/mount_record.hpp"
#include "services/nodeagent/volumes/mount_record_store.hpp"

#include "tests/shared/async/run_coro.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;

// The store's writes from a test's thread: each on a fresh io_context, awaited to the end.
domain::Status put(MountRecordStore& store, MountRecord& r) {
  asio::io_context io;
  domain::Status out;
  async::run_coro(io, [&]() -> asio::awaitable<void> { out = co_await store.put(r); }());
  return out;
}

domain::Status remove(MountRecordStore& store, const std::string& alloc, const std::string& volume) {
  asio::io_context io;
  domain::Status out;
  async::run_coro(io, [&]() -> asio::awaitable<void> { out = co_await store.remove(alloc, volume); }());
  return out;
}

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
    ASSERT_TRUE(put(store, a).ok());
    ASSERT_TRUE(put(store, b).ok());
    EXPECT_GT(a.updated_unix_ms, 1234);
  }
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  ASSERT_EQ(store.all().size(), 2u);
  EXPECT_EQ(store.for_volume("vol[2]").size(), 1u);
  EXPECT_EQ(store.for_alloc("alloc-1").size(), 2u);
  EXPECT_EQ(store.get("alloc-1", "vol[2]")->last_error, "NodeUnpublishVolume failed");
  ASSERT_TRUE(remove(store, "alloc-1", "vol[2]").ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "records" / "alloc-1"));
  ASSERT_TRUE(remove(store, "alloc-1", "other").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-1"));
  EXPECT_TRUE(remove(store, "alloc-1", "other").ok());  // already gone
}

TEST(MountRecordStoreTest, NotifyIsStickyUntilTheRecordIsRemoved) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  auto r = sample();
  r.notify = false;
  ASSERT_TRUE(put(store, r).ok());
  auto marked = r;
  marked.notify = true;
  ASSERT_TRUE(put(store, marked).ok());
  auto stale = r;  // an operation holding a copy from before the release
  stale.phase = MountPhase::mounted;
  ASSERT_TRUE(put(store, stale).ok());
  EXPECT_TRUE(stale.notify);
  EXPECT_TRUE(store.get(r.alloc_id, r.volume_id)->notify);
}

TEST(MountRecordStoreTest, BadIdsAreRefusedAndUnreadableFilesLeftInPlace) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  auto r = sample();
  r.alloc_id = "../escape";
  EXPECT_FALSE(put(store, r).ok());
  std::filesystem::create_directories(dir / "records" / "alloc-9");
  test::write_file(dir / "records" / "alloc-9" / "vol.json", "{broken");
  test::write_file(dir / "records" / "alloc-9" / "vol2.json.tmp", "half a write");
  ASSERT_TRUE(store.load().ok());
  EXPECT_TRUE(store.all().empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "records" / "alloc-9" / "vol.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-9" / "vol2.json.tmp"));
}

TEST(MountRecordStoreTest, MemoryShowsAChangeAtOnceAndTheDiskOnceItIsAwaited) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  auto r = sample();
  asio::io_context io;
  bool written = false;
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    auto pending = store.put(r);  // not started: a coroutine runs only once awaited
    EXPECT_FALSE(store.get(r.alloc_id, r.volume_id));
    auto status = co_await std::move(pending);
    EXPECT_TRUE(status.ok()) << status.error();
    MountRecordStore disk(dir / "records");  // what a restarted agent would read now
    EXPECT_TRUE(disk.load().ok());
    written = disk.get(r.alloc_id, r.volume_id).has_value();
  }());
  EXPECT_TRUE(written);

  // submit(): memory at once, the disk after the fence.
  auto other = sample();
  other.volume_id = "queued";
  store.submit(other);
  EXPECT_TRUE(store.get(other.alloc_id, "queued"));
  store.wait_durable();
  MountRecordStore disk(dir / "records");
  ASSERT_TRUE(disk.load().ok());
  EXPECT_TRUE(disk.get(other.alloc_id, "queued"));
}

TEST(MountRecordStoreTest, AFailedWriteIsTakenBackFromMemory) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  // A file where the allocation's directory should be: the write cannot land.
  test::write_file(dir / "records" / "alloc-1", "in the way");
  auto r = sample();
  const auto status = put(store, r);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("alloc-1"), std::string::npos) << status.error();
  EXPECT_FALSE(store.get(r.alloc_id, r.volume_id));

  // With the way clear, a record that is on disk survives a failed removal in memory too.
  std::filesystem::remove(dir / "records" / "alloc-1");
  ASSERT_TRUE(put(store, r).ok());
  // A directory where the record's name is: unlink refuses it.
  std::filesystem::create_directories(dir / "records" / "alloc-1" / "vol[2].json" / "not-empty");
  const auto removed = remove(store, r.alloc_id, r.volume_id);
  EXPECT_FALSE(removed.ok());
  EXPECT_TRUE(store.get(r.alloc_id, r.volume_id));
  std::filesystem::remove_all(dir / "records" / "alloc-1" / "vol[2].json");
}

}  // namespace
}  // namespace mooring::nodeagent
