// Claims room: deliberate bugs on the claim path that the chaos checker (tests/chaos,
// docs/chaos.md) must catch, so a checker that reports nothing is known to be able to fail.
// Compiled in only when the test suite is (MOORING_TESTS); a release build answers false
// whatever the environment says. In a test build one is on when MOORING_FAULT_SWITCH names it.
#pragma once

namespace mooring::controlplane {

enum class FaultSwitch {
  skip_intent,            // "skip-intent": the claim's intent is recorded after ControllerPublish, not before
  free_before_unpublish,  // "free-before-unpublish": the GC frees a claim before its ControllerUnpublish
  second_writer,          // "second-writer": a second writer may claim a single-writer volume
};

// Read once per process.
bool fault_switch(FaultSwitch which);

}  // namespace mooring::controlplane
