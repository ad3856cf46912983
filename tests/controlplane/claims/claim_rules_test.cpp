// The claim rules, with the scenarios Nomad pins in its tests plus the single-node and
// release-in-progress cases Mooring adds.
#include "services/controlplane/claims/claim_rules.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane {

using domain::AccessMode;
using domain::AttachmentMode;
using domain::ClaimMode;
using domain::ClaimState;

namespace {

domain::Volume volume(std::initializer_list<AccessMode> modes, AttachmentMode att = AttachmentMode::file_system) {
  domain::Volume v;
  v.id = "vol-1";
  v.plugin_id = "hostpath";
  v.external_id = "ext-1";
  for (auto m : modes) v.requested_capabilities.push_back({m, att});
  return v;
}

ClaimRequest claim(std::string alloc, ClaimMode mode, AccessMode access, std::string node = "node-1",
                   AttachmentMode att = AttachmentMode::file_system) {
  ClaimRequest r;
  r.allocation_id = std::move(alloc);
  r.node_id = std::move(node);
  r.external_node_id = "csi-" + r.node_id;
  r.mode = mode;
  r.access_mode = access;
  r.attachment_mode = att;
  return r;
}

const domain::Time t0 = domain::from_unix_ms(1'000'000);

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ClaimRules, FirstClaimSetsTheVolumeModes) {
  auto v = volume({AccessMode::single_node_writer});
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0);
  ASSERT_TRUE(r) << r.refusal().message;
  EXPECT_EQ(*r, ClaimOutcome::created);
  EXPECT_EQ(v.access_mode, AccessMode::single_node_writer);
  EXPECT_EQ(v.attachment_mode, AttachmentMode::file_system);
  const auto& c = v.claims.at("a1");
  EXPECT_EQ(c.state, ClaimState::taken);
  EXPECT_EQ(c.node_id, "node-1");
  EXPECT_EQ(c.external_node_id, "csi-node-1");
  EXPECT_EQ(c.create_time, t0);
}

TEST(ClaimRules, SecondWriterOnSingleWriterVolumeNamesTheHolder) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0));
  auto before = v;
  auto r = take_claim(v, claim("a2", ClaimMode::write, AccessMode::single_node_writer), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(r.refusal().message, "volume max claims reached")) << r.refusal().message;
  EXPECT_TRUE(contains(r.refusal().message, "\"vol-1\"")) << r.refusal().message;
  EXPECT_TRUE(contains(r.refusal().message, "\"a1\"")) << r.refusal().message;
  EXPECT_EQ(v, before);  // a refused claim changes nothing
}

TEST(ClaimRules, ReClaimBySameAllocationIsIdempotent) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0));
  auto before = v;
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0 + std::chrono::seconds(5));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, ClaimOutcome::unchanged);
  EXPECT_EQ(v, before);
}

// A volume whose DeleteVolume is out takes no claim: its storage may already be gone. The
// refusal is retryable (the mark is cleared if the plugin refuses the delete).
TEST(ClaimRules, VolumeBeingDeletedTakesNoClaim) {
  auto v = volume({AccessMode::single_node_writer});
  v.deleting = true;
  auto before = v;
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::unavailable);
  EXPECT_TRUE(contains(r.refusal().message, "\"vol-1\" is being deleted")) << r.refusal().message;
  EXPECT_EQ(v, before);
  domain::Plugin p;
  p.id = "hostpath";
  p.nodes_healthy = 1;
  auto refused = check_schedulable(v, &p);
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(contains(refused->message, "is being deleted")) << refused->message;
  v.deleting = false;
  EXPECT_FALSE(check_schedulable(v, &p).has_value());
}

TEST(ClaimRules, ReadersAlongsideOneWriterOnMultiNodeSingleWriter) {
  auto v = volume({AccessMode::multi_node_single_writer});
  ASSERT_TRUE(take_claim(v, claim("r1", ClaimMode::read, AccessMode::multi_node_single_writer, "n1"), t0));
  ASSERT_TRUE(take_claim(v, claim("r2", ClaimMode::read, AccessMode::multi_node_single_writer, "n2"), t0));
  ASSERT_TRUE(take_claim(v, claim("w1", ClaimMode::write, AccessMode::multi_node_single_writer, "n3"), t0));
  EXPECT_EQ(domain::current_readers(v), 2);
  EXPECT_EQ(domain::current_writers(v), 1);
  auto r = take_claim(v, claim("w2", ClaimMode::write, AccessMode::multi_node_single_writer, "n4"), t0);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.refusal().message, "volume max claims reached"));
  EXPECT_TRUE(contains(r.refusal().message, "\"w1\""));
  EXPECT_TRUE(take_claim(v, claim("r3", ClaimMode::read, AccessMode::multi_node_single_writer, "n4"), t0));
}

TEST(ClaimRules, MultiNodeMultiWriterAllowsManyWriters) {
  auto v = volume({AccessMode::multi_node_multi_writer});
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(take_claim(v, claim("w" + std::to_string(i), ClaimMode::write, AccessMode::multi_node_multi_writer,
                                    "n" + std::to_string(i)),
                           t0));
  EXPECT_EQ(domain::current_writers(v), 5);
}

TEST(ClaimRules, ReaderOnlyModesRefuseWriteClaims) {
  for (auto mode : {AccessMode::multi_node_reader_only, AccessMode::single_node_reader_only}) {
    auto v = volume({mode});
    auto r = take_claim(v, claim("a1", ClaimMode::write, mode), t0);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.refusal().kind, Refusal::Kind::invalid);
    EXPECT_TRUE(contains(r.refusal().message, "read-only"));
    EXPECT_TRUE(take_claim(v, claim("a1", ClaimMode::read, mode), t0));
  }
}

TEST(ClaimRules, ModeNotAmongCapabilitiesIsInvalid) {
  auto v = volume({AccessMode::single_node_writer});
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::multi_node_multi_writer), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::invalid);
  EXPECT_TRUE(contains(r.refusal().message, "does not support access mode multi-node-multi-writer"));
  auto b = take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer, "node-1",
                               AttachmentMode::block_device),
                      t0);
  ASSERT_FALSE(b);
  EXPECT_TRUE(contains(b.refusal().message, "block-device"));
}

TEST(ClaimRules, UnknownModesAreInvalid) {
  auto v = volume({AccessMode::single_node_writer});
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::unknown), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::invalid);
}

TEST(ClaimRules, LaterClaimsMustMatchTheModesInUse) {
  auto v = volume({AccessMode::multi_node_reader_only, AccessMode::multi_node_multi_writer});
  ASSERT_TRUE(take_claim(v, claim("r1", ClaimMode::read, AccessMode::multi_node_reader_only, "n1"), t0));
  auto r = take_claim(v, claim("w1", ClaimMode::write, AccessMode::multi_node_multi_writer, "n2"), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(r.refusal().message, "in use with access mode multi-node-reader-only"));
}

TEST(ClaimRules, SingleNodeModesKeepEveryClaimOnOneNode) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("w1", ClaimMode::write, AccessMode::single_node_writer, "n1"), t0));
  // A reader on the same node is fine; on another node it is not.
  EXPECT_TRUE(take_claim(v, claim("r1", ClaimMode::read, AccessMode::single_node_writer, "n1"), t0));
  auto r = take_claim(v, claim("r2", ClaimMode::read, AccessMode::single_node_writer, "n2"), t0);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.refusal().message, "attached to node \"n1\""));
}

TEST(ClaimRules, ClaimBeingReleasedStillHoldsTheVolume) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("old", ClaimMode::write, AccessMode::single_node_writer), t0));
  ASSERT_FALSE(advance_claim(v, "old", ClaimState::node_detached, t0));
  auto r = take_claim(v, claim("new", ClaimMode::write, AccessMode::single_node_writer), t0);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.refusal().message, "\"old\""));
  EXPECT_TRUE(contains(r.refusal().message, "release in progress: node-detached")) << r.refusal().message;
  // Once freed, the new writer gets it.
  EXPECT_TRUE(free_claim(v, "old"));
  EXPECT_TRUE(take_claim(v, claim("new", ClaimMode::write, AccessMode::single_node_writer), t0));
}

TEST(ClaimRules, AllocationCannotReClaimWhileItsOwnClaimIsReleased) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0));
  ASSERT_FALSE(advance_claim(v, "a1", ClaimState::unpublishing, t0));
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.refusal().message, "being released (unpublishing)"));
}

TEST(ClaimRules, WriterMayDowngradeToRead) {
  auto v = volume({AccessMode::multi_node_single_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::multi_node_single_writer), t0));
  auto r = take_claim(v, claim("a1", ClaimMode::read, AccessMode::multi_node_single_writer), t0);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, ClaimOutcome::updated);
  EXPECT_EQ(domain::current_writers(v), 0);
  EXPECT_TRUE(take_claim(v, claim("a2", ClaimMode::write, AccessMode::multi_node_single_writer, "n2"), t0));
}

TEST(ClaimRules, SameAllocationFromAnotherNodeIsAConflict) {
  auto v = volume({AccessMode::multi_node_multi_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::multi_node_multi_writer, "n1"), t0));
  auto r = take_claim(v, claim("a1", ClaimMode::write, AccessMode::multi_node_multi_writer, "n2"), t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.refusal().kind, Refusal::Kind::conflict);
}

TEST(ClaimRules, LastReleaseResetsTheModes) {
  auto v = volume({AccessMode::multi_node_reader_only});
  ASSERT_TRUE(take_claim(v, claim("r1", ClaimMode::read, AccessMode::multi_node_reader_only, "n1"), t0));
  ASSERT_TRUE(take_claim(v, claim("r2", ClaimMode::read, AccessMode::multi_node_reader_only, "n2"), t0));
  EXPECT_TRUE(free_claim(v, "r1"));
  EXPECT_EQ(v.access_mode, AccessMode::multi_node_reader_only);
  EXPECT_TRUE(free_claim(v, "r2"));
  EXPECT_EQ(v.access_mode, AccessMode::unknown);
  EXPECT_EQ(v.attachment_mode, AttachmentMode::unknown);
  EXPECT_FALSE(free_claim(v, "r2"));  // already freed: idempotent
}

TEST(ClaimRules, ReleaseMovesForwardOnlyAndClearsErrors) {
  auto v = volume({AccessMode::single_node_writer});
  ASSERT_TRUE(take_claim(v, claim("a1", ClaimMode::write, AccessMode::single_node_writer), t0));
  ASSERT_FALSE(advance_claim(v, "a1", ClaimState::unpublishing, t0));
  auto retry_at = t0 + std::chrono::seconds(10);
  ASSERT_FALSE(record_release_failure(v, "a1", "node agent unreachable", retry_at, t0));
  EXPECT_EQ(v.claims.at("a1").last_error, "node agent unreachable");
  EXPECT_EQ(v.claims.at("a1").next_attempt, retry_at);
  EXPECT_EQ(v.claims.at("a1").state, ClaimState::unpublishing);
  ASSERT_FALSE(advance_claim(v, "a1", ClaimState::node_detached, t0));
  EXPECT_EQ(v.claims.at("a1").last_error, "");
  EXPECT_FALSE(domain::is_set(v.claims.at("a1").next_attempt));
  // Skipping forward is fine (node gone: straight to ready-to-free); backwards is not.
  auto back = advance_claim(v, "a1", ClaimState::taken, t0);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kind, Refusal::Kind::invalid);
  EXPECT_FALSE(advance_claim(v, "a1", ClaimState::ready_to_free, t0));
  EXPECT_EQ(past_claims(v), std::vector<std::string>{"a1"});
  auto missing = advance_claim(v, "nope", ClaimState::node_detached, t0);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->kind, Refusal::Kind::not_found);
}

TEST(ClaimRules, SchedulableNeedsPluginWithHealthyInstances) {
  auto v = volume({AccessMode::single_node_writer});
  auto none = check_schedulable(v, nullptr);
  ASSERT_TRUE(none);
  EXPECT_TRUE(contains(none->message, "no CSI plugin named \"hostpath\""));
  domain::Plugin p;
  p.id = "hostpath";
  p.nodes_healthy = 0;
  EXPECT_TRUE(contains(check_schedulable(v, &p)->message, "no healthy nodes"));
  p.nodes_healthy = 1;
  EXPECT_FALSE(check_schedulable(v, &p));
  p.controller_required = true;
  EXPECT_TRUE(contains(check_schedulable(v, &p)->message, "no healthy controllers"));
  p.controllers_healthy = 1;
  EXPECT_FALSE(check_schedulable(v, &p));
}

}  // namespace mooring::controlplane
