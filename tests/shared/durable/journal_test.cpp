// The append-only journal: records come back in order, a second reader sees only what was
// appended since its last look, a torn tail is left out and overwritten, a journal that names
// another checkpoint generation holds nothing, and a restart empties it. The reader reports how
// many torn bytes it left out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "shared/durable/journal.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::durable {
namespace {

namespace fs = std::filesystem;
using Records = std::vector<std::string>;

Records read_new(Journal& j, std::uint64_t generation) {
  Records out;
  const auto ec = j.read_new(generation, out);
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

void append_raw(const fs::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::app | std::ios::binary);
  f << bytes;
}

TEST(Journal, RecordsComeBackInOrderAndAReaderSeesOnlyWhatIsNew) {
  test::TempDir dir("journal");
  const auto p = dir / "j";
  Journal writer(p), reader(p);
  EXPECT_TRUE(read_new(writer, 3).empty());  // no file: nothing follows the checkpoint
  EXPECT_FALSE(fs::exists(p));               // reading creates nothing
  ASSERT_FALSE(writer.append("one"));
  ASSERT_FALSE(writer.append(std::string("two\nlines \0 and a nul", 20)));
  EXPECT_EQ(read_new(reader, 3), (Records{"one", std::string("two\nlines \0 and a nul", 20)}));
  EXPECT_TRUE(read_new(reader, 3).empty());
  ASSERT_FALSE(writer.append(""));
  ASSERT_FALSE(writer.append("four"));
  EXPECT_EQ(read_new(reader, 3), (Records{"", "four"}));
  EXPECT_EQ(reader.record_bytes(), writer.record_bytes());
  // Another reader, or one rewound, reads everything.
  Journal fresh(p);
  EXPECT_EQ(read_new(fresh, 3).size(), 4u);
  reader.rewind();
  EXPECT_EQ(read_new(reader, 3).size(), 4u);
  // The reader appends next, after the writer's records.
  ASSERT_FALSE(reader.append("five"));
  EXPECT_EQ(read_new(writer, 3), Records{"five"});
}

TEST(Journal, ATornTailIsLeftOutThenOverwritten) {
  test::TempDir dir("journal");
  const auto p = dir / "j";
  Journal writer(p);
  EXPECT_TRUE(read_new(writer, 1).empty());
  ASSERT_FALSE(writer.append("kept"));
  const auto good_size = fs::file_size(p);
  for (std::string_view torn : {"r 10 0000000000000000\nshort", "r 4 0000000000000000\nbad!\n", "garbage"}) {
    fs::resize_file(p, good_size);
    append_raw(p, torn);
    Journal reader(p);
    EXPECT_EQ(read_new(reader, 1), Records{"kept"}) << torn;
    ASSERT_FALSE(reader.append("after")) << torn;  // the torn bytes are cut off first
    Journal again(p);
    EXPECT_EQ(read_new(again, 1), (Records{"kept", "after"})) << torn;
  }
}

TEST(Journal, TheBytesOfATornTailAreReportedUntilTheNextAppendCutsThemOff) {
  test::TempDir dir("journal");
  const auto p = dir / "j";
  Journal writer(p);
  EXPECT_TRUE(read_new(writer, 1).empty());
  EXPECT_EQ(writer.dropped_bytes(), 0u);  // no file
  ASSERT_FALSE(writer.restart(1));
  Journal empty(p);
  EXPECT_TRUE(read_new(empty, 1).empty());
  EXPECT_EQ(empty.dropped_bytes(), 0u);  // a header and no record
  ASSERT_FALSE(writer.append("kept"));
  Journal clean(p);
  EXPECT_EQ(read_new(clean, 1), Records{"kept"});
  EXPECT_EQ(clean.dropped_bytes(), 0u);
  constexpr std::string_view torn = "r 10 0000000000000000\nshort";
  append_raw(p, torn);
  Journal reader(p);
  EXPECT_EQ(read_new(reader, 1), Records{"kept"});
  EXPECT_EQ(reader.dropped_bytes(), torn.size());
  // A reader that had read up to the last record sees the tail as new and reports it too.
  EXPECT_TRUE(read_new(clean, 1).empty());
  EXPECT_EQ(clean.dropped_bytes(), torn.size());
  ASSERT_FALSE(reader.append("after"));
  EXPECT_EQ(reader.dropped_bytes(), 0u);
  Journal again(p);
  EXPECT_EQ(read_new(again, 1), (Records{"kept", "after"}));
  EXPECT_EQ(again.dropped_bytes(), 0u);
  // A torn first record counts as well.
  ASSERT_FALSE(writer.restart(2));
  append_raw(p, "r 3 00");
  Journal first(p);
  EXPECT_TRUE(read_new(first, 2).empty());
  EXPECT_EQ(first.dropped_bytes(), 6u);
}

TEST(Journal, AJournalOfAnotherGenerationHoldsNothingAndIsRestartedByTheNextAppend) {
  test::TempDir dir("journal");
  const auto p = dir / "j";
  Journal j(p);
  EXPECT_TRUE(read_new(j, 1).empty());
  ASSERT_FALSE(j.append("of generation 1"));
  // A compaction wrote checkpoint 2 and crashed before restarting the journal.
  Journal after(p);
  EXPECT_TRUE(read_new(after, 2).empty());
  EXPECT_EQ(after.dropped_bytes(), 0u);  // another checkpoint's records, not a torn tail
  ASSERT_FALSE(after.append("of generation 2"));
  Journal check(p);
  EXPECT_EQ(read_new(check, 2), Records{"of generation 2"});
  EXPECT_TRUE(read_new(check, 1).empty());
  // A header cut short (a crash mid-restart) holds nothing either.
  fs::resize_file(p, 5);
  Journal cut(p);
  EXPECT_TRUE(read_new(cut, 2).empty());
}

TEST(Journal, ARestartEmptiesItForTheNewGeneration) {
  test::TempDir dir("journal");
  const auto p = dir / "j";
  Journal writer(p), reader(p);
  EXPECT_TRUE(read_new(writer, 1).empty());
  for (int i = 0; i < 20; ++i) ASSERT_FALSE(writer.append("record " + std::to_string(i)));
  EXPECT_EQ(read_new(reader, 1).size(), 20u);
  ASSERT_FALSE(writer.restart(2));
  EXPECT_EQ(writer.record_bytes(), 0u);
  ASSERT_FALSE(writer.append("x"));
  // A reader that asks for the new generation reads from the start of the restarted file.
  EXPECT_EQ(read_new(reader, 2), Records{"x"});
  EXPECT_EQ(test::read_file(p).rfind("mooring-journal 1 2\n", 0), 0u);
}

}  // namespace
}  // namespace mooring::durable
