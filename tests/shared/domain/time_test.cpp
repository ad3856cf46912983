// Go-style durations and RFC 3339 times.
#include "shared/domain/time.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

using namespace std::chrono_literals;

Duration parse_ok(std::string_view text) {
  auto d = parse_duration(text);
  EXPECT_TRUE(d.ok()) << text << ": " << (d.ok() ? "" : d.error());
  return d.ok() ? *d : Duration{-1};
}

TEST(Duration, ParsesGoSpellings) {
  EXPECT_EQ(parse_ok("30s"), 30s);
  EXPECT_EQ(parse_ok("1m30s"), 90s);
  EXPECT_EQ(parse_ok("250ms"), 250ms);
  EXPECT_EQ(parse_ok("1h"), 1h);
  EXPECT_EQ(parse_ok("1h2m3s"), 1h + 2min + 3s);
  EXPECT_EQ(parse_ok("1.5s"), 1500ms);
  EXPECT_EQ(parse_ok(".5s"), 500ms);
  EXPECT_EQ(parse_ok("0"), 0ms);
  EXPECT_EQ(parse_ok("0s"), 0ms);
  EXPECT_EQ(parse_ok("+5s"), 5s);
  EXPECT_EQ(parse_ok("1500us"), 1ms);
  EXPECT_EQ(parse_ok("2000000ns"), 2ms);
  EXPECT_EQ(parse_ok("1\xC2\xB5s"), 0ms);
}

TEST(Duration, RejectsBadInputWithClearErrors) {
  for (const char* bad : {"", "30", "s", "-5s", "5x", "1m30", "abc", "1.s.", "5 s", "1e3s", "9999999999999h"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.error().find("invalid duration"), std::string::npos) << d.error();
  }
  EXPECT_NE(parse_duration("5x").error().find("unknown unit \"x\""), std::string::npos);
  EXPECT_NE(parse_duration("-1s").error().find("negative"), std::string::npos);
  EXPECT_NE(parse_duration("30").error().find("missing unit"), std::string::npos);
}

TEST(Duration, FormatsShortestGoSpelling) {
  EXPECT_EQ(format_duration(0ms), "0s");
  EXPECT_EQ(format_duration(250ms), "250ms");
  EXPECT_EQ(format_duration(30s), "30s");
  EXPECT_EQ(format_duration(90s), "1m30s");
  EXPECT_EQ(format_duration(1500ms), "1.5s");
  EXPECT_EQ(format_duration(1h), "1h0m0s");
  EXPECT_EQ(format_duration(1h + 1ms), "1h0m0.001s");
}

TEST(Duration, FormatThenParseRoundTrips) {
  for (auto d : {0ms, 1ms, 999ms, 1000ms, 61001ms, 3600000ms, 7322500ms, 86400000ms}) {
    EXPECT_EQ(parse_ok(format_duration(d)), d) << format_duration(d);
  }
}

TEST(Time, FormatsRfc3339UtcWithMillis) {
  EXPECT_EQ(format_time(from_unix_ms(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_time(from_unix_ms(1'700'000'000'123)), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(format_time(from_unix_ms(4'102'444'799'999)), "2099-12-31T23:59:59.999Z");
  EXPECT_EQ(format_time(from_unix_ms(-62'135'596'800'000 + 3'723'004)), "0001-01-01T01:02:03.004Z");
  EXPECT_EQ(format_time(from_unix_ms(253'402'300'799'000)), "9999-12-31T23:59:59.000Z");
  EXPECT_EQ(format_time(from_unix_ms(253'402'300'800'000)), "10000-01-01T00:00:00.000Z");  // past 4 digits: as printf spells it
}

TEST(Time, ParsesRfc3339WithAndWithoutFractionAndOffsets) {
  auto t = parse_time("2023-11-14T22:13:20.123Z");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(to_unix_ms(*t), 1'700'000'000'123);
  t = parse_time("2023-11-14T22:13:20Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(to_unix_ms(*t), 1'700'000'000'000);
  t = parse_time("2023-11-15T00:13:20.5+02:00");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(to_unix_ms(*t), 1'700'000'000'500);
  t = parse_time("2023-11-14T22:13:20.123456789Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(to_unix_ms(*t), 1'700'000'000'123);
}

TEST(Time, RejectsMalformedTimes) {
  for (const char* bad : {"", "2023-11-14", "2023-11-14T22:13:20", "2023-13-01T00:00:00Z", "2023-02-30T00:00:00Z",
                          "2023-11-14T25:00:00Z", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20Zjunk", "yesterday"}) {
    auto t = parse_time(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.error().find("invalid time"), std::string::npos);
  }
}

TEST(Time, RoundTripsNow) {
  const Time t = now();
  auto back = parse_time(format_time(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, t);
}

}  // namespace
}  // namespace mooring::domain
