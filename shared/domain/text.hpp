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

}  // namespace mooring::domain
