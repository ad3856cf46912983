#include "services/nodeagent/volumes/mount_record.hpp"
#include "services/nodeagent/volumes/mount_record_store.hpp"

#include "tests/shared/async/run_coro.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

#include "shared/durable/durable_file.hpp"
#include "shared/durable/journal.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <future>

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

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

TEST(MountRecordStoreTest, PersistsAcrossInstancesIncludingRemovals) {
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
  {
    MountRecordStore store(dir / "records");
    ASSERT_TRUE(store.load().ok());
    ASSERT_EQ(store.all().size(), 2u);
    EXPECT_EQ(store.for_volume("vol[2]").size(), 1u);
    EXPECT_EQ(store.for_alloc("alloc-1").size(), 2u);
    EXPECT_EQ(store.get("alloc-1", "vol[2]")->last_error, "NodeUnpublishVolume failed");
    ASSERT_TRUE(remove(store, "alloc-1", "vol[2]").ok());
    EXPECT_TRUE(remove(store, "alloc-1", "vol[2]").ok());  // already gone
  }
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  ASSERT_EQ(store.all().size(), 1u);
  EXPECT_EQ(store.all()[0].volume_id, "other");
  // Two files, whatever the number of records: no directory per allocation any more.
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-1"));
}

// Agents before the journal kept a file per record under {alloc}/: a new agent takes them over.
TEST(MountRecordStoreTest, PerRecordFilesOfAnOlderAgentAreMovedIntoTheCheckpoint) {
  test::TempDir dir("vol-records");
  auto a = sample();
  auto b = sample();
  b.alloc_id = "alloc-2";
  b.volume_id = "vol-b";
  for (const auto* r : {&a, &b}) {
    std::filesystem::create_directories(dir / "records" / r->alloc_id);
    ASSERT_FALSE(durable::write_durable(dir / "records" / r->alloc_id / (r->volume_id + ".json"), encode(*r)));
  }
  {
    MountRecordStore store(dir / "records");
    ASSERT_TRUE(store.load().ok());
    EXPECT_EQ(store.all().size(), 2u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-1"));
  EXPECT_FALSE(std::filesystem::exists(dir / "records" / "alloc-2"));
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  ASSERT_EQ(store.all().size(), 2u);
  EXPECT_EQ(*store.get("alloc-2", "vol-b"), b);
}

// Every change waiting when the worker gets to one goes out with it: one record, one fdatasync.
TEST(MountRecordStoreTest, ChangesMadeTogetherAreWrittenAsOneJournalRecord) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  std::promise<void> open;
  store.worker().submit([gate = open.get_future().share()] { gate.wait(); });
  asio::io_context io;
  int done = 0;
  std::vector<MountRecord> records(50, sample());
  for (int i = 0; i < 50; ++i) {
    records[i].volume_id = "vol-" + std::to_string(i);
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto s = co_await store.put(records[i]);
          EXPECT_TRUE(s.ok());
          ++done;
        },
        asio::detached);
  }
  io.poll();  // every put has changed memory and queued its flush behind the gate
  EXPECT_EQ(store.size(), 50u);
  open.set_value();
  io.run_for(10s);
  EXPECT_EQ(done, 50);
  durable::Journal journal(dir / "records" / "mounts.journal");
  std::vector<std::string> appended;
  ASSERT_FALSE(journal.read_new(0, appended));
  EXPECT_EQ(appended.size(), 1u);
  MountRecordStore disk(dir / "records");
  ASSERT_TRUE(disk.load().ok());
  EXPECT_EQ(disk.size(), 50u);
}

TEST(MountRecordStoreTest, TheJournalIsFoldedIntoTheCheckpointAndStaysBounded) {
  test::TempDir dir("vol-records");
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  auto r = sample();
  for (int i = 0; i < 2000; ++i) {
    r.volume_id = "vol-" + std::to_string(i % 20);
    r.unmount_attempts = static_cast<unsigned>(i);
    store.submit(r);
    if (i % 7 == 0) {
      ASSERT_TRUE(remove(store, r.alloc_id, "vol-" + std::to_string((i + 3) % 20)).ok());
    }
  }
  store.wait_durable();
  EXPECT_LT(std::filesystem::file_size(dir / "records" / "mounts.journal"), 256u * 1024);
  MountRecordStore disk(dir / "records");
  ASSERT_TRUE(disk.load().ok());
  EXPECT_EQ(disk.all(), store.all());
}

TEST(MountRecordStoreTest, ATornJournalTailIsIgnoredAndCutOffByTheNextWrite) {
  test::TempDir dir("vol-records");
  auto r = sample();
  {
    MountRecordStore store(dir / "records");
    ASSERT_TRUE(store.load().ok());
    ASSERT_TRUE(put(store, r).ok());
  }
  {
    std::ofstream tail(dir / "records" / "mounts.journal", std::ios::app);
    tail << "r 999 0123456789abcdef\n[[\"alloc-1\",\"half";  // a crash in the middle of an append
  }
  MountRecordStore store(dir / "records");
  ASSERT_TRUE(store.load().ok());
  ASSERT_EQ(store.size(), 1u);
  auto other = sample();
  other.volume_id = "after";
  ASSERT_TRUE(put(store, other).ok());
  MountRecordStore disk(dir / "records");
  ASSERT_TRUE(disk.load().ok());
  EXPECT_EQ(disk.size(), 2u);
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
  // A directory where the journal should be: the write cannot land.
  std::filesystem::create_directories(dir / "records" / "mounts.journal" / "in-the-way");
  auto r = sample();
  const auto status = put(store, r);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("mounts.journal"), std::string::npos) << status.error();
  EXPECT_FALSE(store.get(r.alloc_id, r.volume_id));

  // With the way clear, the next write lands.
  std::filesystem::remove_all(dir / "records" / "mounts.journal");
  ASSERT_TRUE(put(store, r).ok());
  MountRecordStore disk(dir / "records");
  ASSERT_TRUE(disk.load().ok());
  EXPECT_TRUE(disk.get(r.alloc_id, r.volume_id));
}

}  // namespace
}  // namespace mooring::nodeagent
