// Test support: a unique directory under /tmp that is gone after the test, including anything a
// test left mounted inside it (unmounted first, lazily if busy; never deleted through a mount).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace mooring::test {

class TempDir {
 public:
  // Creates /tmp/<prefix>-XXXXXX. Paths stay short on purpose: unix socket paths are limited to
  // 107 bytes.
  explicit TempDir(std::string_view prefix = "mooring-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view child) const { return path_ / child; }
  // Creates (with parents) and returns path()/child.
  std::filesystem::path make_dir(std::string_view child) const;

  // Unmounts everything below path(); called by the destructor, usable in TearDown too.
  // True when nothing is left mounted.
  bool unmount_all() const;

 private:
  std::filesystem::path path_;
};

}  // namespace mooring::test
