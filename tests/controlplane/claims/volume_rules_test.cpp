// Register, update and deregister rules (the Nomad scenarios in prior-art.md "Claims and volumes").
#include "services/controlplane/claims/volume_rules.hpp"

#include <gtest/gtest.h>

#include "services/controlplane/claims/claim_rules.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane {

using domain::AccessMode;
using domain::AttachmentMode;

namespace {

domain::Plugin plugin(std::string id = "hostpath") {
  domain::Plugin p;
  p.id = std::move(id);
  p.provider = "hostpath.mooring.dev";
  p.version = "1.2.3";
  p.nodes_healthy = 1;
  p.nodes_expected = 1;
  return p;
}

domain::Volume request() {
  domain::Volume v;
  v.id = "vol-1";
  v.name = "db";
  v.plugin_id = "hostpath";
  v.external_id = "ext-1";
  v.requested_capabilities = {{AccessMode::single_node_writer, AttachmentMode::file_system},
                              {AccessMode::multi_node_reader_only, AttachmentMode::file_system}};
  v.mount_options = {"ext4", {"noatime"}};
  v.secrets = {{"token", "s3cr3t"}};
  v.parameters = {{"tier", "gold"}};
  return v;
}

domain::Volume registered() {
  auto p = plugin();
  return plan_volume_register(nullptr, request(), &p)->volume;
}

domain::Volume in_use() {
  auto v = registered();
  ClaimRequest r{"a1", "n1", "csi-n1", domain::ClaimMode::write, AccessMode::single_node_writer,
                 AttachmentMode::file_system};
  EXPECT_TRUE(take_claim(v, r, domain::from_unix_ms(1)));
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(VolumeRegister, NewVolumeTakesProviderFromPluginAndStartsUnclaimed) {
  auto p = plugin();
  auto req = request();
  req.requested_topologies.required = {{{{"zone", "a"}}}};
  auto plan = plan_volume_register(nullptr, req, &p);
  ASSERT_TRUE(plan) << plan.refusal().message;
  EXPECT_TRUE(plan->created);
  EXPECT_EQ(plan->volume.provider, "hostpath.mooring.dev");
  EXPECT_EQ(plan->volume.provider_version, "1.2.3");
  EXPECT_EQ(plan->volume.access_mode, AccessMode::unknown);
  EXPECT_EQ(plan->volume.secrets.at("token"), "s3cr3t");
  ASSERT_EQ(plan->volume.topologies.size(), 1u);  // a registered volume is where it says
  EXPECT_EQ(plan->volume.topologies[0].segments.at("zone"), "a");
}

TEST(VolumeRegister, UnknownPluginIsRefusedByName) {
  auto plan = plan_volume_register(nullptr, request(), nullptr);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.refusal().kind, Refusal::Kind::invalid);
  EXPECT_TRUE(contains(plan.refusal().message, "no CSI plugin named \"hostpath\""));
}

TEST(VolumeRegister, NeedsCapabilitiesAndASaneCapacityRange) {
  auto p = plugin();
  auto req = request();
  req.requested_capabilities.clear();
  auto a = plan_volume_register(nullptr, req, &p);
  ASSERT_FALSE(a);
  EXPECT_TRUE(contains(a.refusal().message, "RequestedCapabilities"));
  req = request();
  req.requested_capacity_min = 10;
  req.requested_capacity_max = 5;
  auto b = plan_volume_register(nullptr, req, &p);
  ASSERT_FALSE(b);
  EXPECT_TRUE(contains(b.refusal().message, "RequestedCapacityMax"));
}

TEST(VolumeUpdate, PluginIdToUnknownPluginSaysNoSuchPlugin) {
  auto cur = registered();
  auto req = request();
  req.plugin_id = "other";
  auto plan = plan_volume_register(&cur, req, nullptr);
  ASSERT_FALSE(plan);
  EXPECT_TRUE(contains(plan.refusal().message, "no CSI plugin named \"other\""));
}

TEST(VolumeUpdate, IdentityFieldsAreImmutable) {
  auto cur = registered();
  auto p = plugin();
  auto other = plugin("other");
  auto req = request();
  req.plugin_id = "other";
  auto a = plan_volume_register(&cur, req, &other);
  ASSERT_FALSE(a);
  EXPECT_TRUE(contains(a.refusal().message, "\"PluginID\" cannot be changed"));
  req = request();
  req.external_id = "ext-2";
  auto b = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(b);
  EXPECT_TRUE(contains(b.refusal().message, "\"ExternalID\" cannot be changed"));
  req = request();
  req.parameters = {{"tier", "silver"}};
  auto c = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(c);
  EXPECT_TRUE(contains(c.refusal().message, "\"Parameters\""));
}

TEST(VolumeUpdate, VolumeBeingDeletedCannotBeUpdated) {
  auto cur = registered();
  cur.deleting = true;
  auto p = plugin();
  auto req = request();
  req.name = "renamed";
  auto plan = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.refusal().kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(plan.refusal().message, "is being deleted")) << plan.refusal().message;
}

TEST(VolumeUpdate, OmittedSecretsParametersAndRedactedFlagsKeepStoredValues) {
  auto cur = registered();
  auto p = plugin();
  auto req = request();
  req.secrets.clear();
  req.parameters.clear();
  req.mount_options.mount_flags = {domain::kRedacted};
  req.name = "renamed";
  auto plan = plan_volume_register(&cur, req, &p);
  ASSERT_TRUE(plan) << plan.refusal().message;
  EXPECT_FALSE(plan->created);
  EXPECT_EQ(plan->volume.name, "renamed");
  EXPECT_EQ(plan->volume.secrets.at("token"), "s3cr3t");
  EXPECT_EQ(plan->volume.parameters.at("tier"), "gold");
  EXPECT_EQ(plan->volume.mount_options.mount_flags, std::vector<std::string>{"noatime"});
}

TEST(VolumeUpdate, CapabilitiesMayChangeOnlyWhileKeepingTheModeInUse) {
  auto cur = in_use();
  auto p = plugin();
  auto req = request();
  req.requested_capabilities = {{AccessMode::multi_node_reader_only, AttachmentMode::file_system}};
  auto a = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.refusal().kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(a.refusal().message, "in use with access mode single-node-writer"));
  req.requested_capabilities = {{AccessMode::single_node_writer, AttachmentMode::file_system}};
  auto b = plan_volume_register(&cur, req, &p);
  ASSERT_TRUE(b) << b.refusal().message;
  EXPECT_EQ(b->volume.claims.size(), 1u);  // claims survive updates
  // Not in use: anything goes.
  auto idle = registered();
  req.requested_capabilities = {{AccessMode::multi_node_multi_writer, AttachmentMode::block_device}};
  EXPECT_TRUE(plan_volume_register(&idle, req, &p));
}

TEST(VolumeUpdate, MountOptionsCannotChangeWhileInUse) {
  auto cur = in_use();
  auto p = plugin();
  auto req = request();
  req.mount_options = {"xfs", {"noatime"}};
  auto a = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(a);
  EXPECT_TRUE(contains(a.refusal().message, "\"MountOptions\""));
  auto idle = registered();
  auto b = plan_volume_register(&idle, req, &p);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->volume.mount_options.fs_type, "xfs");
}

TEST(VolumeUpdate, TopologyRequestIsImmutableOnceTheVolumeHasTopologies) {
  auto p = plugin();
  auto req = request();
  req.requested_topologies.required = {{{{"zone", "a"}}}};
  auto cur = plan_volume_register(nullptr, req, &p)->volume;
  req.requested_topologies.required = {{{{"zone", "b"}}}};
  auto a = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(a);
  EXPECT_TRUE(contains(a.refusal().message, "\"RequestedTopologies\""));
  // Without topologies it may still change.
  auto plain = registered();
  auto b = plan_volume_register(&plain, req, &p);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->volume.requested_topologies.required[0].segments.at("zone"), "b");
}

TEST(VolumeUpdate, CapacityOnlyGrows) {
  auto p = plugin();
  auto cur = registered();
  cur.capacity = 100;
  cur.requested_capacity_min = 100;
  auto req = request();
  req.requested_capacity_min = 50;
  req.requested_capacity_max = 80;  // below the current capacity: a shrink
  auto a = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(a);
  EXPECT_TRUE(contains(a.refusal().message, "cannot shrink"));
  req.requested_capacity_max = 0;
  auto lowered = plan_volume_register(&cur, req, &p);  // min lowered: only recorded
  ASSERT_TRUE(lowered);
  EXPECT_FALSE(lowered->expand);
  EXPECT_EQ(lowered->volume.capacity, 100);
  req.requested_capacity_min = 200;
  auto raised = plan_volume_register(&cur, req, &p);  // min raised: needs an expand
  ASSERT_TRUE(raised);
  EXPECT_TRUE(raised->expand);
  req.requested_capacity_max = 150;  // max < min
  EXPECT_FALSE(plan_volume_register(&cur, req, &p));
}

// Capacity 0 is "unknown" in CSI: a raised minimum is still a request to grow, so it goes to
// the controller (and is refused there when it cannot expand), never recorded as if done.
TEST(VolumeUpdate, ARaisedMinimumOnAnUnknownCapacityIsAnExpansion) {
  auto p = plugin();
  auto cur = registered();
  cur.capacity = 0;
  cur.requested_capacity_min = 100;
  auto req = request();
  req.requested_capacity_min = 100;
  auto same = plan_volume_register(&cur, req, &p);
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->expand) << "the same minimum again is no expansion";
  req.requested_capacity_min = 200;
  auto raised = plan_volume_register(&cur, req, &p);
  ASSERT_TRUE(raised);
  EXPECT_TRUE(raised->expand);
}

TEST(VolumeDeregister, RefusedWhileInUse) {
  auto v = in_use();
  domain::Allocation running;
  running.id = "a1";
  running.client_status = domain::ClientStatus::running;
  auto lookup = [&](const std::string& id) -> const domain::Allocation* { return id == "a1" ? &running : nullptr; };
  auto a = check_deregister(v, false, lookup);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(a->message, "\"a1\" (running)"));
  // Even with force, a claimant that still runs blocks it.
  auto b = check_deregister(v, true, lookup);
  ASSERT_TRUE(b);
  EXPECT_TRUE(contains(b->message, "not terminal"));
  // Force with every claimant terminal (or gone) succeeds; without force it is still refused.
  running.client_status = domain::ClientStatus::complete;
  EXPECT_FALSE(check_deregister(v, true, lookup));
  EXPECT_TRUE(check_deregister(v, false, lookup));
  auto gone = [](const std::string&) -> const domain::Allocation* { return nullptr; };
  EXPECT_FALSE(check_deregister(v, true, gone));
}

TEST(VolumeDeregister, UnclaimedVolumeGoesAtOnce) {
  auto v = registered();
  EXPECT_FALSE(check_deregister(v, false, [](const std::string&) -> const domain::Allocation* { return nullptr; }));
}

domain::Volume modifiable() {
  auto v = registered();
  v.mutable_parameters = {{"iops", "100"}, {"speed", "slow"}};
  return v;
}

TEST(VolumeModify, DeclaredKeysPassAndTakenClaimsDoNotStopIt) {
  auto v = modifiable();
  EXPECT_FALSE(check_modify(v, {{"iops", "200"}}));
  ClaimRequest r{
      "a1", "n1", "csi-n1", domain::ClaimMode::write, AccessMode::single_node_writer, AttachmentMode::file_system};
  ASSERT_TRUE(take_claim(v, r, domain::from_unix_ms(1)));
  EXPECT_FALSE(check_modify(v, {{"iops", "200"}, {"speed", "fast"}}));  // CSI modifies online
}

TEST(VolumeModify, AnUndeclaredKeyIsRefusedSayingWhetherItIsAnImmutableParameter) {
  auto v = modifiable();
  auto immutable = check_modify(v, {{"tier", "silver"}});  // "tier" is in Parameters
  ASSERT_TRUE(immutable);
  EXPECT_EQ(immutable->kind, Refusal::Kind::invalid);
  EXPECT_TRUE(contains(immutable->message, "\"tier\" is an immutable parameter")) << immutable->message;
  EXPECT_TRUE(contains(immutable->message, "the mutable ones are \"iops\", \"speed\"")) << immutable->message;
  auto unknown = check_modify(v, {{"iops", "5"}, {"colour", "red"}});
  ASSERT_TRUE(unknown);
  EXPECT_TRUE(contains(unknown->message, "\"colour\" is not one of its MutableParameters")) << unknown->message;
  auto none = check_modify(registered(), {{"iops", "5"}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(contains(none->message, "the mutable ones are none")) << none->message;
  auto empty = check_modify(v, {});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->kind, Refusal::Kind::invalid);
}

TEST(VolumeModify, AClaimBeingReleasedOrADeleteRefusesItNamingWhich) {
  auto v = modifiable();
  ClaimRequest r{
      "a1", "n1", "csi-n1", domain::ClaimMode::write, AccessMode::single_node_writer, AttachmentMode::file_system};
  ASSERT_TRUE(take_claim(v, r, domain::from_unix_ms(1)));
  v.claims.at("a1").state = domain::ClaimState::node_detached;
  auto releasing = check_modify(v, {{"iops", "5"}});
  ASSERT_TRUE(releasing);
  EXPECT_EQ(releasing->kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(releasing->message, "allocation \"a1\" is node-detached")) << releasing->message;
  auto deleting = modifiable();
  deleting.deleting = true;
  auto d = check_modify(deleting, {{"iops", "5"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, Refusal::Kind::conflict);
  EXPECT_TRUE(contains(d->message, "cannot be modified"));
}

TEST(VolumeModify, AReRegistrationCannotChangeMutableParameters) {
  auto p = plugin();
  auto cur = modifiable();
  auto req = request();
  req.mutable_parameters = {{"iops", "999"}};
  auto plan = plan_volume_register(&cur, req, &p);
  ASSERT_FALSE(plan);
  EXPECT_TRUE(contains(plan.refusal().message, "/modify")) << plan.refusal().message;
  req.mutable_parameters.clear();  // left out: kept
  auto kept = plan_volume_register(&cur, req, &p);
  ASSERT_TRUE(kept) << kept.refusal().message;
  EXPECT_EQ(kept->volume.mutable_parameters, cur.mutable_parameters);
}

}  // namespace mooring::controlplane
