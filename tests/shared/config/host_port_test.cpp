#include "shared/config/host_port.hpp"

#include <gtest/gtest.h>

namespace mooring::config {
namespace {

TEST(HostPort, NamesAddressesAndBracketedIpv6) {
  auto a = parse_host_port("127.0.0.1:4700");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 4700);
  auto b = parse_host_port("etcd-0.etcd:2379");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "etcd-0.etcd");
  auto c = parse_host_port("[::1]:0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 0);
  EXPECT_EQ(parse_host_port("h:65535")->port, 65535);
}

TEST(HostPort, RefusesWhatIsNotHostColonPort) {
  for (const char* bad : {"", "nowhere", ":4700", "h:", "h:99999", "h:123456", "h:12a", "h:-1", "h: 80"})
    EXPECT_FALSE(parse_host_port(bad)) << bad;
}

TEST(HostPort, WritesIpv6InBrackets) {
  EXPECT_EQ(to_string({.host = "::1", .port = 4701}), "[::1]:4701");
  EXPECT_EQ(to_string({.host = "10.0.0.5", .port = 4701}), "10.0.0.5:4701");
  EXPECT_EQ(to_string(*parse_host_port("[fe80::1]:80")), "[fe80::1]:80");
}

}  // namespace
}  // namespace mooring::config
