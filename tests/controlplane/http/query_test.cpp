#include "services/controlplane/http/query.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::http {

using namespace std::chrono_literals;

TEST(PercentDecode, DecodesEscapesAndPlusOnlyInQueries) {
  EXPECT_EQ(percent_decode("a%20b+c", true), "a b c");
  EXPECT_EQ(percent_decode("a%20b+c", false), "a b+c");
  EXPECT_EQ(percent_decode("%2F%2e%2E", false), "/..");
}

TEST(PercentDecode, RejectsMalformedEscapesAndNul) {
  EXPECT_FALSE(percent_decode("%", false));
  EXPECT_FALSE(percent_decode("%4", false));
  EXPECT_FALSE(percent_decode("%zz", false));
  EXPECT_FALSE(percent_decode("a%00b", false));
}

TEST(ParseQuery, SplitsAndDecodesPairs) {
  auto q = parse_query("prefix=vol%2D1&per_page=10&&flag&wait=10s");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->at("prefix"), "vol-1");
  EXPECT_EQ(q->at("per_page"), "10");
  EXPECT_EQ(q->at("flag"), "");
  EXPECT_EQ(q->at("wait"), "10s");
  EXPECT_FALSE(parse_query("a=%G0"));
}

TEST(SplitTarget, SeparatesPathAndQuery) {
  auto [p, q] = split_target("/v1/volumes?prefix=a?b");
  EXPECT_EQ(p, "/v1/volumes");
  EXPECT_EQ(q, "prefix=a?b");
  auto [p2, q2] = split_target("/v1/volumes");
  EXPECT_EQ(p2, "/v1/volumes");
  EXPECT_EQ(q2, "");
}

TEST(ParseDuration, AcceptsGoSyntaxAndBareSeconds) {
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("1m30s"), 90s);
  EXPECT_EQ(parse_duration("2h"), 2h);
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration("7"), 7s);
  EXPECT_EQ(parse_duration("0s"), 0ms);
}

TEST(ParseDuration, RejectsGarbage) {
  EXPECT_FALSE(parse_duration(""));
  EXPECT_FALSE(parse_duration("s"));
  EXPECT_FALSE(parse_duration("10x"));
  EXPECT_FALSE(parse_duration("-5s"));
  EXPECT_FALSE(parse_duration("1..2s"));
  EXPECT_FALSE(parse_duration("99999999999999999999h"));
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (auto d : {0ms, 250ms, 1500ms, 90'000ms, 3'723'004ms}) EXPECT_EQ(parse_duration(format_duration(d)), d);
  EXPECT_EQ(format_duration(90s), "1m30s");
}

}  // namespace mooring::controlplane::http
