// Test support: small file helpers and polling with a deadline (the suite runs on a noisy shared
// machine, so waits are generous and poll instead of sleeping a fixed time).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::test {

// Writes atomically (temp file + rename), so a process watching the file never sees half of it.
void write_file(const std::filesystem::path& path, std::string_view content);
// The file's content, or "" when it does not exist (or cannot be read: a /proc file of a process
// that just exited). Never throws.
std::string read_file(const std::filesystem::path& path);
std::vector<std::string> read_lines(const std::filesystem::path& path);

// Polls `done` every `poll` until it returns true or `timeout` passes; returns its last answer.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(20));

}  // namespace mooring::test
