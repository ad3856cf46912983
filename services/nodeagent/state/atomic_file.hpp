// Durable small files in the agent's data dir: written to a temp file, fsynced, renamed over the
// target and the directory fsynced, so a crash leaves either the old or the new content.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace mooring::nodeagent {

std::error_code write_file_atomically(const std::filesystem::path& path, std::string_view content);

// nullopt when the file does not exist; `ec` is set for any other failure.
std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec);

}  // namespace mooring::nodeagent
