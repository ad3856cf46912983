// Durable slot files: the newest valid slot wins, a torn write falls back to the previous
// content, a plain file from an older agent is read and then replaced, removal leaves nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "shared/durable/durable_file.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::durable {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read(const fs::path& p) {
  std::error_code ec;
  auto out = read_durable(p, ec);
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

// Changes the first byte of a slot's content, as a write cut short by a crash can leave it (the
// header new, part of the content old).
void tear(const fs::path& p) {
  const auto text = test::read_file(p);
  const auto at = text.find('\n') + 1;
  ASSERT_LT(at, text.size());
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(text[at] == '#' ? '%' : '#');
}

TEST(DurableFile, WritesAlternateSlotsAndTheNewestWins) {
  test::TempDir dir("durable");
  const auto p = dir / "sub" / "state.json";
  EXPECT_FALSE(read(p).has_value());
  ASSERT_FALSE(write_durable(p, "first"));
  ASSERT_FALSE(write_durable(p, "second, longer than the first"));
  ASSERT_FALSE(write_durable(p, "third"));  // back in slot 0, over a longer old content
  EXPECT_EQ(read(p), "third");
  EXPECT_TRUE(fs::exists(dir / "sub" / "state.json.0"));
  EXPECT_TRUE(fs::exists(dir / "sub" / "state.json.1"));
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(list_durable(dir / "sub", ".json"), std::vector<fs::path>{p});  // one file, two slots
  EXPECT_EQ(generation_of(p), 3u);
  EXPECT_EQ(generation_of(dir / "none"), 0u);
  EXPECT_TRUE(list_durable(dir / "none", ".json").empty());
}

TEST(DurableFile, ATornWriteFallsBackToThePreviousContentAndIsOverwrittenNext) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));  // slot 0
  ASSERT_FALSE(write_durable(p, "two"));  // slot 1
  tear(dir / "r.json.1");
  EXPECT_EQ(read(p), "one");
  // The next write must not overwrite the only valid slot.
  ASSERT_FALSE(write_durable(p, "three"));
  EXPECT_EQ(read(p), "three");
  tear(dir / "r.json.1");
  EXPECT_EQ(read(p), "one") << "the write went over the last good content";
}

// A writer that keeps the version re-reads only the headers, and still notices another writer,
// or another writer's torn write, and then checks both slots again.
// generation_of() is a cache key across processes: every write must change it, also the write
// that follows a torn one (whose header already named the next generation).
TEST(DurableFile, AWriteAfterATornOneRaisesTheHighestGeneration) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));  // slot 0, generation 1
  ASSERT_FALSE(write_durable(p, "two"));  // slot 1, generation 2
  ASSERT_FALSE(write_durable(p, "three"));  // slot 0, generation 3
  tear(dir / "r.json.0");
  EXPECT_EQ(read(p), "two");
  const auto cached_key = generation_of(p);  // 3: the torn header
  ASSERT_FALSE(write_durable(p, "four"));
  EXPECT_EQ(read(p), "four");
  EXPECT_GT(generation_of(p), cached_key);
}

TEST(DurableFile, AKeptVersionSkipsTheCheckUnlessAnotherWriterCameBetween) {
  test::TempDir dir("durable");
  const auto p = dir / "big.json";
  Version mine;
  ASSERT_FALSE(write_durable(p, "one", &mine));  // slot 0
  EXPECT_EQ(mine.generation, 1u);
  ASSERT_FALSE(write_durable(p, "two", &mine));  // slot 1
  EXPECT_EQ(mine.generation, 2u);
  ASSERT_FALSE(write_durable(p, "other writer"));  // generation 3, slot 0
  ASSERT_FALSE(write_durable(p, "three", &mine));  // stale version: both slots checked; slot 1
  EXPECT_EQ(mine.generation, 4u);
  EXPECT_EQ(read(p), "three");
  ASSERT_FALSE(write_durable(p, "crashed"));  // generation 5 in slot 0 ...
  tear(dir / "big.json.0");                   // ... cut short by a crash
  EXPECT_EQ(read(p), "three");
  ASSERT_FALSE(write_durable(p, "four", &mine));  // must go to slot 0, not over "three"
  EXPECT_EQ(read(p), "four");
  tear(dir / "big.json.0");
  EXPECT_EQ(read(p), "three") << "a write went over the only good slot";
  std::error_code ec;
  Version seen;
  EXPECT_EQ(read_durable(p, ec, &seen), "three");
  EXPECT_EQ(seen.generation, 4u);
  EXPECT_EQ(seen.slot, 1);
}

TEST(DurableFile, EverySlotTornIsAnErrorNotAnEmptyFile) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));
  tear(dir / "r.json.0");
  std::error_code ec;
  EXPECT_FALSE(read_durable(p, ec).has_value());
  EXPECT_EQ(ec, std::errc::illegal_byte_sequence);
}

// The first write also creates the second slot, empty, so one directory sync covers both
// entries; the empty slot is never taken for content, and the second write fills it.
TEST(DurableFile, TheFirstWriteCreatesBothSlotsAndTheEmptyOneIsNoContent) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));
  ASSERT_TRUE(fs::exists(dir / "r.json.1"));
  EXPECT_EQ(fs::file_size(dir / "r.json.1"), 0u);
  EXPECT_EQ(read(p), "one");
  EXPECT_EQ(generation_of(p), 1u);
  EXPECT_EQ(list_durable(dir.path(), ".json"), std::vector<fs::path>{p});
  ASSERT_FALSE(write_durable(p, "two"));
  EXPECT_GT(fs::file_size(dir / "r.json.1"), 0u);
  EXPECT_EQ(read(p), "two");
  tear(dir / "r.json.1");
  EXPECT_EQ(read(p), "one");

  const auto q = dir / "q.json";
  ASSERT_FALSE(write_durable(q, "only"));
  ASSERT_FALSE(remove_durable(q));  // removal takes the empty slot too
  EXPECT_FALSE(fs::exists(dir / "q.json.0"));
  EXPECT_FALSE(fs::exists(dir / "q.json.1"));
}

TEST(DurableFile, APlainFileFromAnOlderAgentIsReadThenReplaced) {
  test::TempDir dir("durable");
  const auto p = dir / "state.json";
  test::write_file(p, "legacy");
  EXPECT_EQ(read(p), "legacy");
  ASSERT_FALSE(write_durable(p, "new"));
  EXPECT_EQ(read(p), "new");
  EXPECT_FALSE(fs::exists(p));
}

TEST(DurableFile, RemoveLeavesNothing) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));
  ASSERT_FALSE(write_durable(p, "two"));
  ASSERT_FALSE(remove_durable(p));
  EXPECT_FALSE(read(p).has_value());
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_FALSE(remove_durable(p));  // removing nothing is fine
}

}  // namespace
}  // namespace mooring::durable
