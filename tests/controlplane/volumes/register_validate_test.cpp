// Registration and update asked of the plugin (ControllerValidateVolumeCapabilities): what it is
// sent, and that every refusal stores nothing.
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using grpc::StatusCode;
using Kind = volumes::Failure::Kind;
using ValidateResponse = ::csi::v1::ValidateVolumeCapabilitiesResponse;

domain::Volume registered(const std::string& id) {
  auto v = fixtures::volume(id);
  v.context = {{"zone", "a"}};
  v.parameters = {{"tier", "gold"}};
  v.mount_options = {"xfs", {"noatime"}};
  return v;
}

}  // namespace

class RegisterValidateTest : public VolumeLifecycleTest {
 protected:
  volumes::Outcome<volumes::Written> register_one(domain::Volume v) {
    return run(lifecycle.register_volumes({std::move(v)}, anyone));
  }
  // Nothing stored and no event: the index did not move.
  void expect_nothing_stored(std::uint64_t before) {
    EXPECT_EQ(store.volume("vol-1"), nullptr);
    EXPECT_EQ(store.index(), before);
  }
};

TEST_F(RegisterValidateTest, RegisterSendsTheExternalIdContextParametersSecretsAndEachCapability) {
  controller.validations.script = {FakeController::confirmed(), FakeController::confirmed()};
  auto v = registered("vol-1");
  v.requested_capabilities.push_back({domain::AccessMode::multi_node_reader_only, domain::AttachmentMode::block_device});
  auto r = register_one(v);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_NE(store.volume("vol-1"), nullptr);
  ASSERT_EQ(controller.validations.requests.size(), 2u);
  const auto& first = controller.validations.requests[0];
  EXPECT_EQ(first.volume_id(), "ext-vol-1");
  EXPECT_EQ(first.volume_context().at("zone"), "a");
  EXPECT_EQ(first.parameters().at("tier"), "gold");
  EXPECT_EQ(first.secrets().at("password"), "hunter2");
  ASSERT_EQ(first.volume_capabilities_size(), 1);
  EXPECT_EQ(first.volume_capabilities(0).access_mode().mode(), ::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  ASSERT_TRUE(first.volume_capabilities(0).has_mount());
  EXPECT_EQ(first.volume_capabilities(0).mount().fs_type(), "xfs");
  EXPECT_EQ(first.volume_capabilities(0).mount().mount_flags(0), "noatime");
  const auto& second = controller.validations.requests[1].volume_capabilities(0);
  EXPECT_TRUE(second.has_block());
  EXPECT_EQ(second.access_mode().mode(), ::csi::v1::VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY);
}

TEST_F(RegisterValidateTest, AnUnsupportedCapabilityIs400NamingItAndThePluginsMessageAndStoresNothing) {
  const auto before = store.index();
  controller.validations.script = {FakeController::unconfirmed("volume ext-vol-1 is a directory, not a block device")};
  auto v = registered("vol-1");
  v.requested_capabilities = {{domain::AccessMode::single_node_writer, domain::AttachmentMode::block_device}};
  auto r = register_one(v);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_NE(r.error().message.find("volume \"vol-1\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("block-device"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("not a block device"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("hunter2"), std::string::npos);
  expect_nothing_stored(before);
}

TEST_F(RegisterValidateTest, TheSecondCapabilityRefusedStoresNothingEither) {
  const auto before = store.index();
  controller.validations.script = {FakeController::confirmed(), FakeController::unconfirmed("no multi-node writers")};
  auto v = registered("vol-1");
  v.requested_capabilities.push_back({domain::AccessMode::multi_node_multi_writer, domain::AttachmentMode::file_system});
  auto r = register_one(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("multi-node-multi-writer"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("noatime"), std::string::npos) << "mount flags may hold credentials";
  expect_nothing_stored(before);
}

TEST_F(RegisterValidateTest, AnExternalIdThePluginDoesNotKnowIs400NamingIt) {
  const auto before = store.index();
  controller.validations.script = {FakeController::failed<ValidateResponse>(
      csi::Rpc::ValidateVolumeCapabilities, StatusCode::NOT_FOUND, "volume ext-vol-1 not found")};
  auto r = register_one(registered("vol-1"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_NE(r.error().message.find("external id \"ext-vol-1\""), std::string::npos) << r.error().message;
  expect_nothing_stored(before);
}

TEST_F(RegisterValidateTest, NoHealthyControllerIs503AndStoresNothing) {
  const auto before = store.index();  // an empty script answers as the router does with no controller
  auto r = register_one(registered("vol-1"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::unavailable);
  EXPECT_NE(r.error().message.find("cannot validate"), std::string::npos) << r.error().message;
  expect_nothing_stored(before);
}

TEST_F(RegisterValidateTest, AControllerTimeoutIsATimeoutAndStoresNothing) {
  const auto before = store.index();
  controller.validations.script = {FakeController::failed<ValidateResponse>(csi::Rpc::ValidateVolumeCapabilities,
                                                                            StatusCode::DEADLINE_EXCEEDED)};
  auto r = register_one(registered("vol-1"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::timeout);
  expect_nothing_stored(before);
}

TEST_F(RegisterValidateTest, APluginThatDoesNotImplementItRegistersUnchecked) {
  controller.validations.script = {FakeController::failed<ValidateResponse>(csi::Rpc::ValidateVolumeCapabilities,
                                                                            StatusCode::UNIMPLEMENTED)};
  auto r = register_one(registered("vol-1"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(store.volume("vol-1"), nullptr);
}

TEST_F(RegisterValidateTest, APluginWithoutAControllerIsNotAsked) {
  Batch batch;
  fixtures::put_running(batch, {fixtures::plugin("nodes-only", "n1", false)}, &store);
  seed(std::move(batch));
  auto v = registered("vol-1");
  v.plugin_id = "nodes-only";
  auto r = register_one(v);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(controller.validations.requests.empty());
}

TEST_F(RegisterValidateTest, AnUpdateIsAskedOnlyWhenWhatThePluginIsToldChanges) {
  controller.validations.script = {FakeController::confirmed()};
  ASSERT_TRUE(register_one(registered("vol-1")));
  auto renamed = registered("vol-1");
  renamed.name = "renamed";
  ASSERT_TRUE(register_one(renamed));
  EXPECT_EQ(controller.validations.requests.size(), 1u);  // a new name is nothing to the plugin

  controller.validations.script = {FakeController::unconfirmed("read-only only")};
  auto wider = registered("vol-1");
  wider.requested_capabilities = {{domain::AccessMode::multi_node_multi_writer, domain::AttachmentMode::file_system}};
  const auto before = store.index();
  auto r = register_one(wider);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_EQ(store.index(), before);
  EXPECT_EQ(store.volume("vol-1")->requested_capabilities, registered("vol-1").requested_capabilities);
}

}  // namespace mooring::controlplane
