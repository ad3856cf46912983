#include "services/controlplane/claims/fault_switch.hpp"

#include <array>
#include <cstdlib>
#include <utility>

#include "shared/log/log.hpp"

namespace mooring::controlplane {

namespace {

#ifdef MOORING_FAULT_SWITCHES
constexpr bool kCompiled = true;
#else
constexpr bool kCompiled = false;
#endif

constexpr std::array kNames{std::pair{FaultSwitch::skip_intent, std::string_view("skip-intent")},
                            std::pair{FaultSwitch::free_before_unpublish, std::string_view("free-before-unpublish")},
                            std::pair{FaultSwitch::second_writer, std::string_view("second-writer")}};

std::string_view environment_value() {
  const char* env = std::getenv("MOORING_FAULT_SWITCH");
  return env ? env : "";
}

std::string_view chosen() {
  static const std::string_view value = [] {
    const auto v = environment_value();
    // Loud, so a log shows why a run broke the rules.
    if (!v.empty()) log::Logger{"fault-switch"}.warn("test build: a deliberate claim bug is on", {{"switch", v}});
    return v;
  }();
  return value;
}

}  // namespace

bool fault_switch(FaultSwitch which) {
  if constexpr (!kCompiled) return false;
  for (const auto& [key, name] : kNames)
    if (key == which) return chosen() == name;
  return false;
}

std::optional<std::string> fault_switch_refusal(std::string_view value, bool compiled) {
  if (value.empty()) return std::nullopt;
  const auto set = "MOORING_FAULT_SWITCH=" + std::string(value) + " is set";
  if (!compiled)
    return set +
           ", but this build has no fault switches (configure with -DMOORING_FAULT_SWITCHES=ON, as `make "
           "test` does); unset it";
  for (const auto& [key, name] : kNames)
    if (name == value) return std::nullopt;
  return set + ", which names no fault switch (skip-intent, free-before-unpublish, second-writer)";
}

std::optional<std::string> fault_switch_refusal() { return fault_switch_refusal(environment_value(), kCompiled); }

}  // namespace mooring::controlplane
