// Certificate identities: the URI SAN round-trips, and nothing that is not a Mooring identity
// parses as one.
#include <gtest/gtest.h>

#include "shared/tls/identity.hpp"

namespace mooring::tls {
namespace {

TEST(TlsIdentity, UrisRoundTripForEveryRole) {
  for (const Identity& id : {Identity{Role::server, {}}, Identity{Role::cli, {}}, Identity{Role::agent, "node-1.a_b"}}) {
    const auto uri = identity_uri(id);
    ASSERT_TRUE(uri.starts_with("spiffe://mooring/")) << uri;
    EXPECT_EQ(parse_identity_uri(uri), id) << uri;
  }
  EXPECT_EQ(identity_uri(Identity{Role::agent, "n1"}), "spiffe://mooring/node/n1");
  EXPECT_EQ(common_name(Identity{Role::agent, "n1"}), "agent.n1.mooring");
  EXPECT_EQ(common_name(Identity{Role::server, {}}), "server.mooring");
}

TEST(TlsIdentity, ForeignOrMalformedUrisAreNoIdentity) {
  EXPECT_FALSE(parse_identity_uri("spiffe://other/node/n1"));
  EXPECT_FALSE(parse_identity_uri("https://mooring/server"));
  EXPECT_FALSE(parse_identity_uri("spiffe://mooring/node/"));
  EXPECT_FALSE(parse_identity_uri("spiffe://mooring/node/a/b"));
  EXPECT_FALSE(parse_identity_uri("spiffe://mooring/node/.."));
  EXPECT_FALSE(parse_identity_uri("spiffe://mooring/servers"));
  EXPECT_FALSE(parse_identity_uri("spiffe://mooring/admin"));
}

TEST(TlsIdentity, RolesParseByName) {
  EXPECT_EQ(parse_role("agent"), Role::agent);
  EXPECT_FALSE(parse_role("client"));
}

}  // namespace
}  // namespace mooring::tls
