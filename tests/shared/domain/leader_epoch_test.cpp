#include "shared/domain/leader_epoch.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace mooring::domain {
namespace {

TEST(LeaderEpoch, TextRoundTripsEveryValue) {
  for (const LeaderEpoch e : {LeaderEpoch{}, LeaderEpoch{0xcdf818194e3a8c32u, 1207},
                              LeaderEpoch{std::numeric_limits<std::uint64_t>::max(),
                                          std::numeric_limits<std::int64_t>::max()}}) {
    const auto back = LeaderEpoch::parse(e.to_text());
    ASSERT_TRUE(back) << e.to_text();
    EXPECT_EQ(*back, e);
  }
  EXPECT_EQ((LeaderEpoch{0xcdf818194e3a8c32u, 1207}).to_text(), "cdf818194e3a8c32/1207");
  EXPECT_TRUE(LeaderEpoch{}.none());
  EXPECT_FALSE((LeaderEpoch{1, 0}).none());
}

TEST(LeaderEpoch, AnythingElseDoesNotParse) {
  for (const char* bad : {"", "/", "12", "12/", "/12", "12/-3", "12/+3", "xyz/3", "12/3x", "12/3/4", " 12/3",
                          "10000000000000000/1", "12/99999999999999999999"})
    EXPECT_FALSE(LeaderEpoch::parse(bad)) << bad;
}

}  // namespace
}  // namespace mooring::domain
