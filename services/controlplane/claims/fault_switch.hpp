// Claims room: deliberate bugs on the claim path that the chaos checker (tests/chaos,
// docs/chaos.md) must catch, so a checker that reports nothing is known to be able to fail.
// Compiled in only with MOORING_FAULT_SWITCHES=ON (the Makefile's test build); any other build
// answers false and refuses to start when MOORING_FAULT_SWITCH is set. In a build with them, one
// is on when MOORING_FAULT_SWITCH names it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mooring::controlplane {

enum class FaultSwitch {
  skip_intent,            // "skip-intent": the claim's intent is recorded after ControllerPublish, not before
  free_before_unpublish,  // "free-before-unpublish": the GC frees a claim before its ControllerUnpublish
  second_writer,          // "second-writer": a second writer may claim a single-writer volume
};

// Read once per process.
bool fault_switch(FaultSwitch which);

// Why the control plane must not start (exit 2), given MOORING_FAULT_SWITCH's value ("" when
// unset) and whether the switches are compiled in: set in a build without them (whoever set it
// expects a bug that is not there, and a run that "passes" would prove nothing), or naming no
// switch. nullopt otherwise.
std::optional<std::string> fault_switch_refusal(std::string_view env_value, bool compiled);
// fault_switch_refusal for this process and this build.
std::optional<std::string> fault_switch_refusal();

}  // namespace mooring::controlplane
