// Test support: tests that need real mounts run only as root and say so when skipped.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

namespace mooring::test {

inline bool running_as_root() { return ::geteuid() == 0; }

}  // namespace mooring::test

// Use at the top of a TEST body or SetUp(): skips (not fails) when not root.
#define MOORING_REQUIRE_ROOT()                                                                    \
  do {                                                                                            \
    if (!::mooring::test::running_as_root())                                                      \
      GTEST_SKIP() << "needs root: this test performs real bind mounts (mount(2)); run as root"; \
  } while (0)
