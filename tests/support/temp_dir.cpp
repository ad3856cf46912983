#include "tests/support/temp_dir.hpp"

#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "tests/support/mountinfo.hpp"

namespace mooring::test {

TempDir::TempDir(std::string_view prefix) {
  std::string tmpl = "/tmp/" + std::string(prefix) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (!unmount_all()) {
    // Deleting through a live mount would destroy the mounted data: leave the directory.
    std::cerr << "TempDir: mounts remain below " << path_ << "; not removing it\n";
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path TempDir::make_dir(std::string_view child) const {
  auto p = path_ / child;
  std::filesystem::create_directories(p);
  return p;
}

bool TempDir::unmount_all() const { return unmount_all_under(path_); }

}  // namespace mooring::test
