// Table and key/value rendering: alignment, blanks, UTF-8 widths, one line per row.
#include <gtest/gtest.h>

#include "cli/table.hpp"

namespace mooring::cli {
namespace {

TEST(CliTable, ColumnsAlignWithTwoSpacesAndNoTrailingBlanks) {
  Table t({"ID", "Plugin ID", "Schedulable"});
  t.add_row({"data", "hostpath", "true"});
  t.add_row({"a-much-longer-id", "x", ""});
  EXPECT_EQ(t.render(),
            "ID                Plugin ID  Schedulable\n"
            "data              hostpath   true\n"
            "a-much-longer-id  x\n");
}

TEST(CliTable, MissingCellsAreBlankAndExtraCellsDropped) {
  Table t({"A", "B"});
  t.add_row({"1"});
  t.add_row({"2", "3", "ignored"});
  EXPECT_EQ(t.render(), "A  B\n1\n2  3\n");
  EXPECT_EQ(t.size(), 2u);
}

TEST(CliTable, HeaderOnlyWhenEmpty) {
  Table t({"Name", "State"});
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.render(), "Name  State\n");
}

TEST(CliTable, Utf8CellsAlignByCharacters) {
  Table t({"Name", "X"});
  t.add_row({"zoë", "1"});
  t.add_row({"abcd", "2"});
  EXPECT_EQ(t.render(), "Name  X\nzoë   1\nabcd  2\n");
  EXPECT_EQ(display_width("zoë"), 3u);
}

TEST(CliTable, NewlinesInCellsDoNotBreakRows) {
  Table t({"Last Error"});
  t.add_row({"line one\nline two"});
  EXPECT_EQ(t.render(), "Last Error\nline one line two\n");
}

TEST(CliTable, KeyValuesAlignTheEqualsSigns) {
  KeyValues kv;
  kv.add("ID", "data");
  kv.add("Access Mode", "single-node-writer");
  kv.add("Empty", "");
  EXPECT_EQ(kv.render(),
            "ID          = data\n"
            "Access Mode = single-node-writer\n"
            "Empty       =\n");
}

}  // namespace
}  // namespace mooring::cli
