// What is known of a plugin: an instance whose agent the control plane has not heard from yet is
// unknown (not healthy); a capability nobody fingerprinted has reported is unknown, not "no".
#include <gtest/gtest.h>

#include "shared/domain/plugin_facts.hpp"

namespace mooring::domain {
namespace {

PluginInstance controller(bool fingerprinted, bool creates = false) {
  PluginInstance i;
  i.plugin_id = "hp";
  i.type = PluginType::monolith;
  i.healthy = true;
  if (fingerprinted) {
    i.node_info = NodeInfo{};
    i.controller_info = ControllerInfo{};
    i.controller_info->supports_create_delete = creates;
  }
  return i;
}

TEST(PluginFacts, HealthIsUnknownOnlyWithTheUnknownDescriptionAndNotHealthy) {
  PluginInstance i = controller(true);
  EXPECT_FALSE(health_unknown(i));
  i.healthy = false;
  i.health_description = "node down: no heartbeat for 10s";
  EXPECT_FALSE(health_unknown(i));
  i.health_description = std::string(kHealthUnknown);
  EXPECT_TRUE(health_unknown(i));
  Plugin p;
  p.nodes["n1"] = controller(true);
  EXPECT_FALSE(any_health_unknown(p));
  p.controllers["n2"] = i;
  EXPECT_TRUE(any_health_unknown(p));
}

TEST(PluginFacts, ACapabilityIsSupportedWhenAFingerprintedControllerSaysSo) {
  Plugin p;
  p.controllers["n1"] = controller(false);  // another one still starting does not matter
  p.controllers["n2"] = controller(true, /*creates=*/true);
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::optional<bool>(true));
}

TEST(PluginFacts, ACapabilityNoFingerprintedControllerHasIsUnknownWhileOneIsNotFingerprintedYet) {
  Plugin p;
  p.controllers["n1"] = controller(false);
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::nullopt);
  p.controllers["n2"] = controller(true, /*creates=*/false);
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::nullopt);
  p.controllers.erase("n1");
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::optional<bool>(false));
}

// What an instance said last stays known while its health is unknown (after a control plane
// restart): its capabilities answer, only its health waits for the agent.
TEST(PluginFacts, AnInstanceWhoseHealthIsUnknownKeepsItsCapabilities) {
  Plugin p;
  auto i = controller(true, /*creates=*/true);
  i.healthy = false;
  i.health_description = std::string(kHealthUnknown);
  p.controllers["n1"] = i;
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::optional<bool>(true));
  p.controllers["n1"].controller_info->supports_create_delete = false;
  EXPECT_EQ(controller_supports(p, &ControllerInfo::supports_create_delete), std::optional<bool>(false));
  EXPECT_EQ(controller_supports(Plugin{}, &ControllerInfo::supports_create_delete), std::optional<bool>(false));
}

}  // namespace
}  // namespace mooring::domain
