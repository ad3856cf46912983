// State room: the one place the `--state` URL picks a backend. "etcd://host:port[,...][/prefix]"
// is etcd (state/etcd/: control planes that share the state, one leader); anything else is the
// embedded SQLite file in the data dir (state/sqlite/).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "services/controlplane/state/fenced_backend.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane {

struct EtcdOptions;

struct StateLocation {
  std::string url;                                          // --state
  std::string data_dir;                                     // --data-dir
  std::string etcd_ca_file, etcd_cert_file, etcd_key_file;  // TLS to etcd (all empty: plaintext)
};

struct OpenedBackend {
  std::unique_ptr<StateBackend> backend;
  FencedBackend* shared = nullptr;          // etcd: the backend, whose writes the leader fences; null with SQLite
  std::shared_ptr<const EtcdOptions> etcd;  // etcd: where it is (the election makes its own channels)
  std::string where;                        // for logs: the SQLite file or the etcd URL
};

// The URL names a state shared by several control planes (etcd).
bool is_shared_state(std::string_view url);

// Opens the backend `where.url` names. With etcd the data dir (this member's audit log and, by
// default, its keyring) is made here, 0700, as SQLite makes it; an existing one is left as it is.
domain::Expected<OpenedBackend> open_backend(const StateLocation& where);

}  // namespace mooring::controlplane
