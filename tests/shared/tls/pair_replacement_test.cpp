// Replacing a certificate and its key (a renewal, a re-enrollment): a crash after any step of
// tls::replace_pair leaves, once tls::recover_pair has run at start-up, a key and a certificate
// that match; the old pair before the key's rename, the new one after it.
#include <gtest/gtest.h>

#include <filesystem>

#include "shared/tls/pair_replacement.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::tls {
namespace {

KeyPair agent_pair(const KeyPair& ca) {
  auto pair = create_certificate(ca, {.identity = {Role::agent, "node-1"}});
  EXPECT_TRUE(pair) << pair.error();
  return *pair;
}

}  // namespace

TEST(PairReplacementTest, ACrashAtAnyStepOfAReplacementLeavesAMatchingPairAfterRecovery) {
  auto ca = create_ca({});
  ASSERT_TRUE(ca) << ca.error();
  const auto old_pair = agent_pair(*ca), new_pair = agent_pair(*ca);
  for (int steps = 0; steps <= kAllPairSteps; ++steps) {
    test::TempDir dir{"cert-files"};
    const PairPaths paths{dir / "agent.pem", dir / "agent-key.pem"};
    ASSERT_TRUE(replace_file(paths.cert, old_pair.cert_pem));
    ASSERT_TRUE(replace_file(paths.key, old_pair.key_pem));
    ASSERT_TRUE(replace_pair(paths, new_pair.key_pem, new_pair.cert_pem, steps));  // the crash
    ASSERT_TRUE(recover_pair(paths)) << "after step " << steps;
    auto now = read_pair(paths);
    ASSERT_TRUE(now);
    EXPECT_TRUE(key_matches(now->cert_pem, now->key_pem)) << "after step " << steps;
    // Before the key's rename the old pair stands; from it on, the new one.
    EXPECT_EQ(now->key_pem, steps >= 3 ? new_pair.key_pem : old_pair.key_pem) << "after step " << steps;
    EXPECT_EQ(now->cert_pem, steps >= 3 ? new_pair.cert_pem : old_pair.cert_pem) << "after step " << steps;
    EXPECT_FALSE(std::filesystem::exists(dir / "agent.pem.next")) << "after step " << steps;
  }
}

TEST(PairReplacementTest, RecoveryRefusesAPairThatNothingMatchesNamingTheFiles) {
  auto ca = create_ca({});
  ASSERT_TRUE(ca);
  const auto a = agent_pair(*ca), b = agent_pair(*ca);
  test::TempDir dir{"cert-files"};
  const PairPaths paths{dir / "agent.pem", dir / "agent-key.pem"};
  ASSERT_TRUE(replace_file(paths.cert, a.cert_pem));
  ASSERT_TRUE(replace_file(paths.key, b.key_pem));
  auto r = recover_pair(paths);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find(paths.cert.string()), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(paths.key.string()), std::string::npos) << r.error();
  auto kept = read_pair(paths);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->cert_pem, a.cert_pem);  // nothing changed
}

}  // namespace mooring::tls
