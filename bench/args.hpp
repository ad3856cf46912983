// Bench helper: the `--name value` pairs bench/harness.py passes to the bench binaries
// (mooring-bench-claims, mooring-bench-nodes, mooring-bench-stream). A flag without its value is
// dropped; the binary's own check then names what is missing.
#pragma once

#include <map>
#include <string>

namespace mooring::bench {

inline std::map<std::string, std::string> flag_pairs(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  return flags;
}

}  // namespace mooring::bench
