// The chaos checker's deliberate claim bugs (claims/fault_switch.hpp): a build without them
// refuses to start when MOORING_FAULT_SWITCH is set, naming the variable; a build with them
// refuses a value that names no switch.
#include <gtest/gtest.h>

#include "services/controlplane/claims/fault_switch.hpp"

namespace mooring::controlplane {

TEST(FaultSwitchTest, ABuildWithoutTheSwitchesRefusesToStartWhenTheVariableIsSet) {
  for (const auto* value : {"second-writer", "anything"}) {
    auto refusal = fault_switch_refusal(value, /*compiled=*/false);
    ASSERT_TRUE(refusal) << value;
    EXPECT_NE(refusal->find("MOORING_FAULT_SWITCH=" + std::string(value)), std::string::npos) << *refusal;
    EXPECT_NE(refusal->find("-DMOORING_FAULT_SWITCHES=ON"), std::string::npos) << *refusal;
  }
  EXPECT_FALSE(fault_switch_refusal("", false));
}

TEST(FaultSwitchTest, ABuildWithTheSwitchesTakesOnlyTheirNames) {
  for (const auto* name : {"skip-intent", "free-before-unpublish", "second-writer", ""})
    EXPECT_FALSE(fault_switch_refusal(name, /*compiled=*/true)) << name;
  auto typo = fault_switch_refusal("second_writer", true);
  ASSERT_TRUE(typo);
  EXPECT_NE(typo->find("names no fault switch"), std::string::npos) << *typo;
}

}  // namespace mooring::controlplane
