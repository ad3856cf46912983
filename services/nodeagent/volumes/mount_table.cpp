#include "services/nodeagent/volumes/mount_table.hpp"

#include "shared/mounts/mount_point.hpp"

namespace mooring::nodeagent {

bool ProcMountTable::is_mounted(const std::filesystem::path& path) const { return mounts::is_mount_point(path); }

}  // namespace mooring::nodeagent
