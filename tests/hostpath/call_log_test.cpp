// mooring-hostpath's call log records what reached the plugin: parameters, volume and publish
// context as sent, a clone or snapshot source, and the secrets only as a digest of a canonical
// form (never their values), so an end-to-end test can check that each reached its call.
#include <gtest/gtest.h>

#include <chrono>

#include "plugins/hostpath/call_log.hpp"
#include "shared/tls/digest.hpp"
#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
constexpr std::int64_t kMi = 1 << 20;
constexpr char kSecret[] = "hunter2-call-log";

TEST(SecretsDigest, IsTheSha256OfKeyEqualsValueLinesSortedByKeyAndEmptyForNone) {
  // printf 'password=hunter2\n' | sha256sum
  EXPECT_EQ(secrets_digest({{"password", "hunter2"}}),
            "e24c8274d50b6074851f94ad4534fe5930e4e058fe1f3df6ff897034a436156b");
  EXPECT_EQ(secrets_digest({{"b", "2"}, {"a", "1"}}), tls::sha256_hex("a=1\nb=2\n"));
  EXPECT_NE(secrets_digest({{"a", "1"}}), secrets_digest({{"a", "2"}}));
  EXPECT_EQ(secrets_digest({}), "");
}

class HostpathCallLog : public PluginTest {
 protected:
  HostpathCallLog() : PluginTest("hp-calllog") {}
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start()); }

  // The one logged call of `rpc` for `volume_id`.
  nlohmann::json call(const std::string& rpc, const std::string& volume_id) {
    nlohmann::json found;
    for (const auto& c : plugin_->calls())
      if (c.at("rpc") == rpc && c.at("volume_id") == volume_id) {
        EXPECT_TRUE(found.is_null()) << "two " << rpc << " calls for " << volume_id;
        found = c;
      }
    EXPECT_FALSE(found.is_null()) << "no " << rpc << " call for " << volume_id;
    return found;
  }

  static void add_secrets(google::protobuf::Map<std::string, std::string>* m) {
    (*m)["password"] = kSecret;
    (*m)["user"] = "admin";
  }
  static std::string secrets_hash() { return tls::sha256_hex(std::string("password=") + kSecret + "\nuser=admin\n"); }
};

TEST_F(HostpathCallLog, CreateVolumeRecordsParametersTheCloneSourceAndTheSecretsDigest) {
  csi::v1::Volume source;
  ASSERT_TRUE(plugin_->create_volume("source", kMi, &source).ok());
  csi::v1::CreateVolumeRequest req;
  req.set_name("clone");
  *req.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  (*req.mutable_parameters())["tier"] = "gold";
  add_secrets(req.mutable_secrets());
  req.mutable_volume_content_source()->mutable_volume()->set_volume_id(source.volume_id());
  csi::v1::CreateVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(plugin_->controller().CreateVolume(&ctx, req, &resp).ok());

  const auto c = call("CreateVolume", "clone");
  EXPECT_EQ(c.at("parameters"), (nlohmann::json{{"tier", "gold"}})) << c.dump();
  EXPECT_EQ(c.at("content_source"), "volume:" + source.volume_id());
  EXPECT_EQ(c.at("secrets_sha256"), secrets_hash());
  // The plain create carried neither secrets nor a source.
  const auto plain = call("CreateVolume", "source");
  EXPECT_EQ(plain.at("secrets_sha256"), "");
  EXPECT_EQ(plain.at("content_source"), "");
  EXPECT_EQ(test::read_file(plugin_->call_log()).find(kSecret), std::string::npos);
}

TEST_F(HostpathCallLog, PublishStageAndNodePublishRecordContextsAndTheSecretsDigest) {
  MOORING_REQUIRE_ROOT();
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("ctx", kMi, &vol).ok());
  auto context = vol.volume_context();
  context["team"] = "e2e";
  const auto staging = dir_.make_dir("staging");
  const auto target = dir_ / "target";

  csi::v1::ControllerPublishVolumeRequest pub;
  pub.set_volume_id(vol.volume_id());
  pub.set_node_id(plugin_->node_id());
  *pub.mutable_volume_capability() = mount_capability(AM::SINGLE_NODE_WRITER);
  *pub.mutable_volume_context() = context;
  add_secrets(pub.mutable_secrets());
  csi::v1::ControllerPublishVolumeResponse published;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->controller().ControllerPublishVolume(&ctx, pub, &published).ok());
  }
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id(vol.volume_id());
  stage.set_staging_target_path(staging.string());
  *stage.mutable_volume_capability() = mount_capability(AM::SINGLE_NODE_WRITER);
  *stage.mutable_volume_context() = context;
  *stage.mutable_publish_context() = published.publish_context();
  add_secrets(stage.mutable_secrets());
  {
    csi::v1::NodeStageVolumeResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->node().NodeStageVolume(&ctx, stage, &resp).ok());
  }
  csi::v1::NodePublishVolumeRequest node_pub;
  node_pub.set_volume_id(vol.volume_id());
  node_pub.set_staging_target_path(staging.string());
  node_pub.set_target_path(target.string());
  *node_pub.mutable_volume_capability() = mount_capability(AM::SINGLE_NODE_WRITER);
  *node_pub.mutable_volume_context() = context;
  *node_pub.mutable_publish_context() = published.publish_context();
  add_secrets(node_pub.mutable_secrets());
  {
    csi::v1::NodePublishVolumeResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->node().NodePublishVolume(&ctx, node_pub, &resp).ok());
  }

  const nlohmann::json want_context(std::map<std::string, std::string>(context.begin(), context.end()));
  const nlohmann::json want_publish(
      std::map<std::string, std::string>(published.publish_context().begin(), published.publish_context().end()));
  ASSERT_FALSE(want_publish.empty());
  for (const auto* rpc : {"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"}) {
    const auto c = call(rpc, vol.volume_id());
    EXPECT_EQ(c.at("volume_context"), want_context) << c.dump();
    EXPECT_EQ(c.at("secrets_sha256"), secrets_hash()) << c.dump();
    EXPECT_EQ(c.at("publish_context"), std::string(rpc) == "ControllerPublishVolume" ? nlohmann::json::object()
                                                                                    : want_publish)
        << c.dump();
  }
  EXPECT_EQ(test::read_file(plugin_->call_log()).find(kSecret), std::string::npos);
  ASSERT_TRUE(plugin_->unpublish(vol.volume_id(), target).ok());
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging).ok());
}

// The chaos checker orders plugin calls against other processes by CLOCK_MONOTONIC: each line
// carries when the call arrived and when its answer was decided, both inside the caller's wait.
TEST_F(HostpathCallLog, EveryCallCarriesItsMonotonicStartAndEnd) {
  plugin_->set_faults(R"({"rules":[{"rpc":"CreateVolume","delay_ms":150}]})");
  const auto mono = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const auto before = mono();
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("timed", kMi, &vol).ok());
  const auto after = mono();

  const auto c = call("CreateVolume", "timed");
  const auto start = c.at("start_mono_ns").get<std::int64_t>();
  const auto end = c.at("end_mono_ns").get<std::int64_t>();
  EXPECT_LE(before, start) << c.dump();
  EXPECT_LE(end, after) << c.dump();
  EXPECT_GE(end - start, 150'000'000) << "the injected delay is inside the call: " << c.dump();
}

}  // namespace
}  // namespace mooring::hostpath
