// A node's identity over its life, the rules alone: with no record any certificate acts; an
// enrollment pins its certificate and locks every other one out; a renewal acts from the first
// call made with it and the certificate it replaces only for the overlap; an operator's purge
// refuses every certificate issued before it; an expired certificate never acts. Introduction
// tokens: bound to one node, used once, expiring, refused naming why (401 or 403).
#include <gtest/gtest.h>

#include "services/controlplane/nodes/node_identity.hpp"

namespace mooring::controlplane {
namespace {

using namespace std::chrono_literals;

const domain::Time kNow = domain::from_unix_ms(1'700'000'000'000);

domain::NodeCertificate cert(std::string serial, domain::Time issued, domain::Time expires = kNow + 24h) {
  return {.serial = std::move(serial), .key_sha256 = "key-" + serial, .issued = issued, .expires = expires};
}

domain::NodeIdentity fresh() {
  domain::NodeIdentity id;
  id.node_id = "node-1";
  return id;
}

bool acts(const domain::NodeIdentity* id, const domain::NodeCertificate& c, domain::Time now = kNow) {
  return !refuse_certificate("node-1", id, c, now);
}

std::string why(const domain::NodeIdentity* id, const domain::NodeCertificate& c, domain::Time now = kNow) {
  auto r = refuse_certificate("node-1", id, c, now);
  return r ? *r : std::string("(acts)");
}

TEST(NodeIdentityRule, WithoutARecordAnyUnexpiredCertificateActs) {
  EXPECT_TRUE(acts(nullptr, cert("A1", kNow - 1h)));
  const auto unpinned = fresh();  // a record that only holds introduction tokens
  EXPECT_TRUE(acts(&unpinned, cert("A1", kNow - 1h)));
}

TEST(NodeIdentityRule, AnExpiredCertificateNeverActsEvenOnAnOldConnection) {
  EXPECT_FALSE(acts(nullptr, cert("A1", kNow - 2h, kNow - 1ms)));
  EXPECT_NE(why(nullptr, cert("A1", kNow - 2h, kNow)).find("expired at"), std::string::npos);
}

TEST(NodeIdentityRule, EnrollmentPinsItsCertificateAndLocksEveryOtherOneOut) {
  auto id = fresh();
  pin_enrolled(id, cert("B2", kNow));
  EXPECT_EQ(id.generation, 1u);
  EXPECT_TRUE(acts(&id, cert("B2", kNow)));
  EXPECT_FALSE(acts(&id, cert("A1", kNow - 1h)));
  const auto message = why(&id, cert("A1", kNow - 1h));
  EXPECT_NE(message.find("certificate A1 of node \"node-1\" no longer acts"), std::string::npos) << message;
  EXPECT_NE(message.find("generation 1"), std::string::npos) << message;
  // A re-enrollment: the first pinned certificate is out at once (no overlap).
  pin_enrolled(id, cert("C3", kNow));
  EXPECT_FALSE(acts(&id, cert("B2", kNow)));
  EXPECT_TRUE(acts(&id, cert("C3", kNow)));
}

TEST(NodeIdentityRule, ARenewalActsFromItsFirstUseAndTheOldOneOnlyForTheOverlap) {
  auto id = fresh();
  pin_enrolled(id, cert("B2", kNow - 1h));
  hold_renewal(id, cert("R1", kNow));
  EXPECT_EQ(id.generation, 2u);
  // Pending: both act (the agent has not switched yet; it may crash before writing the files).
  EXPECT_TRUE(acts(&id, cert("B2", kNow - 1h)));
  EXPECT_TRUE(acts(&id, cert("R1", kNow)));
  EXPECT_FALSE(adopt_renewal(id, "B2", kNow));  // a call with the old one changes nothing
  ASSERT_TRUE(adopt_renewal(id, "R1", kNow));
  EXPECT_EQ(id.current.serial, "R1");
  EXPECT_TRUE(id.pending.empty());
  EXPECT_FALSE(adopt_renewal(id, "R1", kNow));  // once
  // The replaced certificate acts for the overlap, then not.
  EXPECT_TRUE(acts(&id, cert("B2", kNow - 1h), kNow + kRenewalOverlap - 1ms));
  EXPECT_FALSE(acts(&id, cert("B2", kNow - 1h), kNow + kRenewalOverlap));
  EXPECT_NE(why(&id, cert("B2", kNow - 1h), kNow + kRenewalOverlap).find("replaced by its renewal"), std::string::npos);
  // A second renewal replaces the first one's pending state.
  hold_renewal(id, cert("R2", kNow + 1h));
  hold_renewal(id, cert("R3", kNow + 1h));
  EXPECT_FALSE(acts(&id, cert("R2", kNow + 1h), kNow + 1h));
  EXPECT_TRUE(acts(&id, cert("R3", kNow + 1h), kNow + 1h));
}

TEST(NodeIdentityRule, APurgeRefusesCertificatesIssuedBeforeItUntilTheNodeEnrollsAgain) {
  auto id = fresh();
  pin_enrolled(id, cert("B2", kNow - 1h));
  revoke(id, kNow);
  EXPECT_EQ(id.generation, 2u);
  EXPECT_FALSE(acts(&id, cert("B2", kNow - 1h)));
  EXPECT_FALSE(acts(&id, cert("X9", kNow - 1s)));  // made outside enrollment, before the purge
  EXPECT_NE(why(&id, cert("X9", kNow - 1s)).find("before the node was purged at"), std::string::npos);
  EXPECT_TRUE(acts(&id, cert("X10", kNow + 1s)));  // made after it, by whoever holds the CA key
  pin_enrolled(id, cert("C3", kNow + 1s));
  EXPECT_TRUE(acts(&id, cert("C3", kNow + 1s)));
  EXPECT_FALSE(acts(&id, cert("X10", kNow + 1s)));  // pinned: only the enrolled one
}

TEST(NodeIdentityRule, IntroductionTtlIsADurationUpToAWeek) {
  EXPECT_EQ(*introduction_ttl(""), std::chrono::milliseconds(kDefaultIntroductionTtl));
  EXPECT_EQ(*introduction_ttl("15m"), std::chrono::milliseconds(15min));
  EXPECT_FALSE(introduction_ttl("soon"));
  EXPECT_FALSE(introduction_ttl("0s"));
  auto long_one = introduction_ttl("200h");
  ASSERT_FALSE(long_one);
  EXPECT_NE(long_one.error().find("at most 168h"), std::string::npos) << long_one.error();
}

domain::Introduction intro(std::string accessor, std::string hash, domain::Time expires) {
  return {.accessor_id = std::move(accessor), .secret_hash = std::move(hash), .expiration_time = expires};
}

TEST(NodeIdentityRule, AnIntroductionEnrollsItsOwnNodeOnceBeforeItExpires) {
  std::map<std::string, domain::NodeIdentity> ids{{"node-1", fresh()}, {"node-2", fresh()}};
  ids["node-2"].node_id = "node-2";
  add_introduction(ids["node-1"], intro("a1", "h1", kNow + 1h), kNow);
  add_introduction(ids["node-1"], intro("a2", "h2", kNow - 1s), kNow - 1h);
  add_introduction(ids["node-2"], intro("a3", "h3", kNow + 1h), kNow);

  auto ok = check_introduction(ids, "node-1", "h1", kNow);
  EXPECT_EQ(ok.status, 0u) << ok.why;
  EXPECT_EQ(ids["node-1"].introductions.at(ok.index).accessor_id, "a1");

  const auto refused = [&](const std::string& hash, unsigned status, const std::string& why) {
    const auto r = check_introduction(ids, "node-1", hash, kNow);
    EXPECT_EQ(r.status, status) << hash;
    EXPECT_NE(r.why.find(why), std::string::npos) << r.why;
  };
  refused("h3", 403u, "was made for node \"node-2\", not node \"node-1\"");
  refused("h2", 401u, "expired at");
  ids["node-1"].introductions.at(ok.index).used_time = kNow;
  refused("h1", 401u, "was used at");
  refused("nope", 401u, "not found");
}

TEST(NodeIdentityRule, AddingAnIntroductionDropsTheExpiredOnes) {
  auto id = fresh();
  add_introduction(id, intro("old", "h0", kNow + 1min), kNow);
  add_introduction(id, intro("new", "h1", kNow + 2h), kNow + 1h);
  ASSERT_EQ(id.introductions.size(), 1u);
  EXPECT_EQ(id.introductions[0].accessor_id, "new");
}

// Expired introductions are never kept: a record that holds nothing else (a node that never
// enrolled, never purged) is removed; one with a certificate or a purge keeps the rest.
TEST(NodeIdentityRule, PruningDropsExpiredIntroductionsAndRecordsLeftWithNothing) {
  auto never_enrolled = fresh();
  never_enrolled.introductions = {intro("gone", "h0", kNow - 1s)};
  EXPECT_EQ(prune_introductions(never_enrolled, kNow), Pruned::remove);

  auto waiting = fresh();
  waiting.introductions = {intro("gone", "h0", kNow), intro("alive", "h1", kNow + 1h)};
  EXPECT_EQ(prune_introductions(waiting, kNow), Pruned::changed);
  ASSERT_EQ(waiting.introductions.size(), 1u);
  EXPECT_EQ(waiting.introductions[0].accessor_id, "alive");
  EXPECT_EQ(prune_introductions(waiting, kNow), Pruned::unchanged);

  auto enrolled = fresh();
  pin_enrolled(enrolled, cert("s1", kNow - 1h));
  enrolled.introductions = {intro("used", "h2", kNow - 1s)};
  EXPECT_EQ(prune_introductions(enrolled, kNow), Pruned::changed);
  EXPECT_TRUE(enrolled.introductions.empty());
  auto purged = fresh();
  revoke(purged, kNow - 1h);
  purged.introductions = {intro("gone", "h3", kNow - 1s)};
  EXPECT_EQ(prune_introductions(purged, kNow), Pruned::changed);
}

}  // namespace
}  // namespace mooring::controlplane
