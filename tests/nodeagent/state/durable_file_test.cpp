// Durable slot files: the newest valid slot wins, a torn write falls back to the previous
// content, a plain file from an older agent is read and then replaced, removal leaves nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "services/nodeagent/state/atomic_file.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read(const fs::path& p) {
  std::error_code ec;
  auto out = read_durable(p, ec);
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

// Overwrites the middle of a file, as a write cut short by a crash leaves it.
void tear(const fs::path& p) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(p) - 3));
  f.write("XYZ", 3);
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
  EXPECT_EQ(durable_name_of_slot("state.json.1"), "state.json");
  EXPECT_FALSE(durable_name_of_slot("state.json").has_value());
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

TEST(DurableFile, EverySlotTornIsAnErrorNotAnEmptyFile) {
  test::TempDir dir("durable");
  const auto p = dir / "r.json";
  ASSERT_FALSE(write_durable(p, "one"));
  tear(dir / "r.json.0");
  std::error_code ec;
  EXPECT_FALSE(read_durable(p, ec).has_value());
  EXPECT_EQ(ec, std::errc::illegal_byte_sequence);
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
}  // namespace mooring::nodeagent
