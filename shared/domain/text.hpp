// Domain: how messages name things. Every refusal and event quotes ids the same way:
// volume "data", node "node-1". (Not `quoted`: std::quoted wins by ADL for a std::string.)
#pragma once

#include <string>
#include <string_view>

namespace mooring::domain {

inline std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

// "" in the default namespace, else ` in namespace "ns"`: appended where a message names a volume
// or an allocation, so messages about the default namespace read as they always did.
inline std::string in_namespace(std::string_view ns) {
  if (ns.empty() || ns == "default") return {};
  return " in namespace " + in_quotes(ns);
}

}  // namespace mooring::domain
