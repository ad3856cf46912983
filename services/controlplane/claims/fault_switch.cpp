#include "services/controlplane/claims/fault_switch.hpp"

#ifdef MOORING_FAULT_SWITCHES
#include <cstdlib>
#include <string_view>

#include "shared/log/log.hpp"
#endif

namespace mooring::controlplane {

#ifdef MOORING_FAULT_SWITCHES

namespace {

constexpr std::string_view name_of(FaultSwitch which) {
  switch (which) {
    case FaultSwitch::skip_intent:
      return "skip-intent";
    case FaultSwitch::free_before_unpublish:
      return "free-before-unpublish";
    case FaultSwitch::second_writer:
      return "second-writer";
  }
  return "";
}

std::string_view chosen() {
  static const std::string_view value = [] {
    const char* env = std::getenv("MOORING_FAULT_SWITCH");
    std::string_view v = env ? env : "";
    // Loud, so a log shows why a run broke the rules.
    if (!v.empty()) log::Logger{"fault-switch"}.warn("test build: a deliberate claim bug is on", {{"switch", v}});
    return v;
  }();
  return value;
}

}  // namespace

bool fault_switch(FaultSwitch which) { return chosen() == name_of(which); }

#else

bool fault_switch(FaultSwitch) { return false; }

#endif

}  // namespace mooring::controlplane
