#include "plugins/hostpath/volume_content.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "plugins/hostpath/loop_device.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

// Bytes of the regular files under `dir` (what a copy writes: copies are not sparse).
std::int64_t tree_bytes(const fs::path& dir) {
  std::int64_t sum = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec) && !it->is_symlink(fec)) sum += static_cast<std::int64_t>(it->file_size(fec));
  }
  return sum;
}

}  // namespace

Status copy_tree(const fs::path& from, const fs::path& to) {
  // Not enough space is the spec's RESOURCE_EXHAUSTED ("not enough space to create snapshot"):
  // checked first, as a copy that runs out midway reports only an I/O error.
  struct statvfs st {};
  const std::int64_t needed = tree_bytes(from);
  if (::statvfs(to.parent_path().c_str(), &st) == 0) {
    const auto free_bytes = static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
    if (needed > free_bytes) {
      return {StatusCode::RESOURCE_EXHAUSTED, "not enough space to copy " + from.string() + ": " +
                                                  std::to_string(needed) + " bytes needed, " +
                                                  std::to_string(free_bytes) + " free"};
    }
  }
  std::error_code ec;
  fs::create_directories(to, ec);
  if (!ec) fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) {
    // Out of space after all (another writer took it meanwhile): RESOURCE_EXHAUSTED too.
    const bool no_space = ec == std::errc::no_space_on_device || ec.value() == EDQUOT;
    const std::string message = "cannot copy " + from.string() + " to " + to.string() + ": " + ec.message();
    std::error_code rec;
    fs::remove_all(to, rec);
    return {no_space ? StatusCode::RESOURCE_EXHAUSTED : StatusCode::INTERNAL, message};
  }
  return Status::OK;
}

Status size_block_image(const fs::path& volume_dir, std::int64_t size) {
  const auto image = volume_dir / kBlockImage;
  std::error_code ec;
  if (!fs::exists(image, ec)) std::ofstream(image, std::ios::binary).flush();
  const auto have = fs::file_size(image, ec);
  if (!ec && static_cast<std::int64_t>(have) < size) fs::resize_file(image, static_cast<std::uintmax_t>(size), ec);
  if (ec)
    return {StatusCode::INTERNAL,
            "cannot size the block volume's backing file " + image.string() + ": " + ec.message()};
  return Status::OK;
}

}  // namespace mooring::hostpath
