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

// Lower-case hex of raw bytes (digests, MACs, random ids).
inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

}  // namespace mooring::domain
