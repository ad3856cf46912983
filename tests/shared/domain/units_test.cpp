// Sizes as the CLI takes them: one parser, exact for whole numbers.
#include "shared/domain/units.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

TEST(ParseSize, DecimalAndBinaryUnitsWithOrWithoutB) {
  EXPECT_EQ(parse_size("1073741824"), 1073741824);
  EXPECT_EQ(parse_size("0"), 0);
  EXPECT_EQ(parse_size("10GiB"), 10737418240);
  EXPECT_EQ(parse_size("10Gi"), 10737418240);
  EXPECT_EQ(parse_size("10G"), 10000000000);
  EXPECT_EQ(parse_size("10GB"), 10000000000);
  EXPECT_EQ(parse_size("3k"), 3000);
  EXPECT_EQ(parse_size("512MiB"), 536870912);
  EXPECT_EQ(parse_size("512Mi"), 512LL << 20);
  EXPECT_EQ(parse_size("2 GiB"), 2147483648);
  EXPECT_EQ(parse_size("7B"), 7);
  EXPECT_EQ(parse_size("1Ti"), 1LL << 40);
}

TEST(ParseSize, WholeNumbersAreExactAndFractionsRoundToTheByte) {
  // Past 2^53 a double would lose the last byte.
  EXPECT_EQ(parse_size("9007199254740993"), 9007199254740993LL);
  EXPECT_EQ(parse_size("9223372036854775807"), 9223372036854775807LL);
  EXPECT_EQ(parse_size("1.5Gi"), 1610612736);
  EXPECT_EQ(parse_size("0.5K"), 500);
  EXPECT_EQ(parse_size("1.0000001Ki"), 1024);
}

TEST(ParseSize, AnythingElseIsRefused) {
  for (std::string_view bad : {"", "GiB", "-1", "+1", "10 parsecs", "12Qi", "1.", ".5G", "1..5G", "10 G i",
                               "99999999999T", "9223372036854775808", "8388608Ti", "1e9", "0x10", " 5"})
    EXPECT_FALSE(parse_size(bad)) << bad;
}

}  // namespace
}  // namespace mooring::domain
