// Wire, private to the proto_convert*.cpp files: the string-map copies their messages share.
#pragma once

#include <string>

#include <google/protobuf/map.h>

#include "shared/domain/volume.hpp"

namespace mooring::domain {

inline StringMap to_map(const google::protobuf::Map<std::string, std::string>& m) {
  return StringMap(m.begin(), m.end());
}

inline void fill(google::protobuf::Map<std::string, std::string>* out, const StringMap& in) {
  out->clear();
  for (const auto& [k, v] : in) (*out)[k] = v;
}

}  // namespace mooring::domain
