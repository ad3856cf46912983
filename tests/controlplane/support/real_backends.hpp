// Test support: the two real state backends a test runs the same body on (a reload, a restart):
// SQLite in a temp dir, and etcd on a member the test started. Each call opens one anew.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "tests/support/etcd_process.hpp"

namespace mooring::controlplane::fixtures {

// The backend an open returned, or null with the reason as a test failure.
template <class B>
std::unique_ptr<StateBackend> opened(domain::Expected<std::unique_ptr<B>> b) {
  EXPECT_TRUE(b) << b.error();
  return b ? std::move(*b) : nullptr;
}

inline std::unique_ptr<StateBackend> open_sqlite(const std::filesystem::path& dir) {
  return opened(SqliteBackend::open(dir));
}

// Options for the started member `etcd`, under `prefix`.
inline EtcdOptions etcd_options(const test::EtcdProcess& etcd, std::string prefix) {
  EtcdOptions o;
  o.endpoints = {etcd.endpoint()};
  o.prefix = std::move(prefix);
  o.timeout = std::chrono::seconds(2);
  return o;
}

inline std::unique_ptr<StateBackend> open_etcd(const EtcdOptions& o) { return opened(EtcdBackend::open(o)); }

}  // namespace mooring::controlplane::fixtures
