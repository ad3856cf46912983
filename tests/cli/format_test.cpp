// Cell formatting, sizes, durations, times, and the address parser.
#include <gtest/gtest.h>

#include "cli/format.hpp"
#include "cli/http_client.hpp"

namespace mooring::cli {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

TEST(CliFormat, TextOfJsonValues) {
  EXPECT_EQ(text(json("s")), "s");
  EXPECT_EQ(text(json(3)), "3");
  EXPECT_EQ(text(json(true)), "true");
  EXPECT_EQ(text(json(nullptr)), "");
  EXPECT_EQ(text(json::array({1, 2})), "[1,2]");
  json v = {{"ID", "x"}, {"N", 7}};
  EXPECT_EQ(field(v, "ID"), "x");
  EXPECT_EQ(field(v, "Missing"), "");
  EXPECT_EQ(field(json::array(), "ID"), "");
  EXPECT_EQ(field_int(v, "N"), 7);
  EXPECT_EQ(field_int(v, "ID"), 0);
  EXPECT_FALSE(field_bool(v, "ID"));
}

TEST(CliFormat, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.0 KiB");
  EXPECT_EQ(human_bytes(104857600), "100.0 MiB");
  EXPECT_EQ(human_bytes(1073741824), "1.0 GiB");
  EXPECT_EQ(human_bytes(1610612736), "1.5 GiB");
}

TEST(CliFormat, ParseDuration) {
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("2m"), 2min);
  EXPECT_EQ(parse_duration("1m30s"), 90s);
  EXPECT_EQ(parse_duration("1h"), 1h);
  EXPECT_EQ(parse_duration("5"), 5s);
  EXPECT_FALSE(parse_duration(""));
  EXPECT_FALSE(parse_duration("soon"));
  EXPECT_FALSE(parse_duration("10x"));
}

TEST(CliFormat, MapsAndTopologies) {
  EXPECT_EQ(map_text(json{{"a", "1"}, {"b", "2"}}), "a=1, b=2");
  EXPECT_EQ(map_text(json::object()), "<none>");
  EXPECT_EQ(map_text(json()), "<none>");
  json topo = json::array({json{{"Segments", {{"zone", "a"}}}}, json{{"Segments", {{"zone", "b"}}}}});
  EXPECT_EQ(topologies_text(topo), "zone=a; zone=b");
  EXPECT_EQ(topologies_text(json::array()), "<none>");
}

TEST(CliFormat, TimesShowHowFarAwayTheyAre) {
  auto base = parse_rfc3339("2026-01-02T03:04:05Z");
  ASSERT_TRUE(base);
  EXPECT_EQ(time_text("2026-01-02T03:04:17Z", *base), "2026-01-02T03:04:17Z (in 12s)");
  EXPECT_EQ(time_text("2026-01-02T03:01:05.250Z", *base), "2026-01-02T03:01:05.250Z (3m ago)");
  EXPECT_EQ(time_text("2026-01-02T05:04:05+02:00", *base), "2026-01-02T05:04:05+02:00 (in 0s)");
  EXPECT_EQ(time_text("", *base), "");
  EXPECT_EQ(time_text("yesterday", *base), "yesterday");
  EXPECT_EQ(short_duration(3700s), "1h1m");
  EXPECT_EQ(short_duration(75s), "1m15s");
  EXPECT_EQ(short_duration(90000s), "1d1h");
}

TEST(CliAddress, AcceptedForms) {
  auto a = parse_address("http://127.0.0.1:4700");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "4700");
  EXPECT_EQ(a->url, "http://127.0.0.1:4700");
  auto bare = parse_address("localhost:8080/");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->url, "http://localhost:8080");
  auto noport = parse_address("http://cp.example");
  ASSERT_TRUE(noport);
  EXPECT_EQ(noport->port, "80");
  auto v6 = parse_address("http://[::1]:4700");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->url, "http://[::1]:4700");
  EXPECT_FALSE(v6->tls);
  auto tls = parse_address("https://cp:4700");
  ASSERT_TRUE(tls) << tls.error();
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->url, "https://cp:4700");
  auto tls_default = parse_address("https://cp.example/");
  ASSERT_TRUE(tls_default);
  EXPECT_EQ(tls_default->port, "443");
}

TEST(CliAddress, RefusedFormsSayWhy) {
  auto ftp = parse_address("ftp://cp:21");
  ASSERT_FALSE(ftp);
  EXPECT_NE(ftp.error().find("only https:// and http://"), std::string::npos);
  EXPECT_FALSE(parse_address("http://cp:4700/v1"));
  EXPECT_FALSE(parse_address("http://cp:port"));
  EXPECT_FALSE(parse_address("http://cp:70000"));
  EXPECT_FALSE(parse_address("ftp://cp:21"));
  EXPECT_FALSE(parse_address(""));
}

TEST(CliAddress, UrlEncodeKeepsUnreservedCharacters) {
  EXPECT_EQ(url_encode("vol-1_a.b~c"), "vol-1_a.b~c");
  EXPECT_EQ(url_encode("a/b c"), "a%2Fb%20c");
}

}  // namespace
}  // namespace mooring::cli
