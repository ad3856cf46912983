// mooring-hostpath: how a volume's content is made — a copy of another volume or snapshot (with a
// space check first) and a block volume's sparse backing file.
#pragma once

#include <cstdint>
#include <filesystem>

#include <grpcpp/support/status.h>

namespace mooring::hostpath {

// Copies a directory tree; symlinks are copied as links, never followed out of the volume. Not
// enough space for it is RESOURCE_EXHAUSTED (the spec's "not enough space"), checked first; a
// failed copy leaves nothing at `to`.
grpc::Status copy_tree(const std::filesystem::path& from, const std::filesystem::path& to);

// A block volume's backing file in `volume_dir`, sparse, at least `size` bytes (made, or grown:
// a clone's copy, an expansion).
grpc::Status size_block_image(const std::filesystem::path& volume_dir, std::int64_t size);

}  // namespace mooring::hostpath
