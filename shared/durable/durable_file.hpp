// Durable small files (node agent state, hostpath plugin state).
//
// write_file_atomically: a temp file, fsynced, renamed over the target and the directory
// fsynced, so a crash leaves either the old or the new content. Every write creates a file.
//
// write_durable / read_durable / remove_durable: for files rewritten many times (allocation
// state, mount records, pending status reports). The content lives in two slots, `<path>.0` and
// `<path>.1`, each "mooring-slot 1 <generation> <length> <hash64 hex>\n" + content. A write
// overwrites, in place, the slot that does not hold the newest valid content, then fdatasyncs it;
// a crash mid-write leaves that slot failing its checksum and the other one intact. The first
// write creates both slots (one directory sync); after it no file is created and no rename or
// directory sync is needed, which makes a write several times cheaper than a rename (ext4 inode
// allocation under churn, three flushes).
// A plain `<path>` written by an older agent is read until the first slot write replaces it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace mooring::durable {

std::error_code write_file_atomically(const std::filesystem::path& path, std::string_view content);

// nullopt when the file does not exist; `ec` is set for any other failure.
std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec);

// The checksum of slot and journal content: detects torn and foreign bytes, eight bytes a step.
// Not cryptographic: nothing here is adversarial.
std::uint64_t hash64(std::string_view s);

// fsync of a directory, so the entries created or removed in it survive a crash (best effort).
void sync_dir(const std::filesystem::path& dir);

// Which slot holds the newest valid content, as this process last read or wrote it. A writer of
// a large file keeps it so the next write need not read and check both slots again: only their
// headers are, to see that no other process wrote since.
struct Version {
  std::uint64_t generation = 0;  // 0: unknown
  int slot = -1;
};

std::error_code write_durable(const std::filesystem::path& path, std::string_view content, Version* version = nullptr);
// The newest valid slot's content (or the plain file); nullopt when there is none. `ec` is set
// when slots exist but none is valid (illegal_byte_sequence) or a read fails.
std::optional<std::string> read_durable(const std::filesystem::path& path, std::error_code& ec,
                                        Version* version = nullptr);
// Removes both slots (the older first, so a crash between leaves the last content, as a crash
// before the removal would) and the plain file, then syncs the directory.
std::error_code remove_durable(const std::filesystem::path& path);
// The highest generation in the slots' headers (0 when there is no slot), read without the
// content: it changes with every write, by any process, so it tells a cached copy is stale.
std::uint64_t generation_of(const std::filesystem::path& path);
// The durable files in `dir` whose names end with `suffix`, each once, whether kept in slots or
// (written by an older build) as a plain file; sorted. Empty when `dir` does not exist.
std::vector<std::filesystem::path> list_durable(const std::filesystem::path& dir, std::string_view suffix);

}  // namespace mooring::durable
