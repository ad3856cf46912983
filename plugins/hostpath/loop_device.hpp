// mooring-hostpath: loop devices for block volumes. A block volume is a sparse backing file; the
// node attaches it to a loop device (/dev/loopN) at NodeStageVolume and detaches it at
// NodeUnstageVolume. The kernel's loop ioctls directly (LOOP_CTL_GET_FREE, LOOP_CONFIGURE,
// LOOP_CLR_FD, LOOP_SET_CAPACITY; Linux 5.8+), no losetup binary, as the bind mounts use
// mount(2) directly. `losetup -a` lists what this attaches.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace mooring::hostpath {

// The backing file of a block volume, inside its directory.
inline constexpr const char* kBlockImage = "block.img";

// A volume directory holding a backing file is a block volume (what a node finds without the
// controller's catalogue).
bool is_block_volume(const std::filesystem::path& volume_dir);

// Attaches `file` to a free loop device (read-only when asked) and returns its path
// (/dev/loopN), or an empty string with `error` set.
std::string attach_loop(const std::filesystem::path& file, bool read_only, std::string& error);

// The file the loop device is attached to (what `losetup -a` shows), or "" when `device` is not a
// loop device with a backing file (detached, or gone after a reboot).
std::string loop_backing_file(const std::string& device);

// Whether `device` is a loop device attached to `file` (compared by canonical path).
bool loop_backed_by(const std::string& device, const std::filesystem::path& file);

// Every loop device attached to `file`.
std::vector<std::string> loops_backed_by(const std::filesystem::path& file);

// Detaches the loop device; OK when it is already detached. EBUSY (still open) is retried briefly.
std::error_code detach_loop(const std::string& device);

// Makes the loop device see its backing file's current size (after the file grew).
std::error_code refresh_loop_capacity(const std::string& device);

// Why loop devices cannot be used on this machine, or an empty string.
std::string check_loop_support();

}  // namespace mooring::hostpath
