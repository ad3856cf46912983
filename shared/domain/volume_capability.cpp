// Node-side usage names.
#include "shared/domain/volume_capability.hpp"

namespace mooring::domain {

std::string usage_dir_name(bool read_only, AttachmentMode attachment, AccessMode access) {
  std::string out = read_only ? "ro-" : "rw-";
  out += to_string(attachment);
  out += '-';
  out += to_string(access);
  return out;
}

}  // namespace mooring::domain
