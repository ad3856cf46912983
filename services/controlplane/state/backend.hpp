// State room: where the state is made durable. The in-memory store hands every write to a
// StateBackend as one transaction and changes memory only after the backend says it is durable.
// SQLite implements it today; a replicated log could implement it later without touching the
// store's users. Rows are the storage JSON of shared/domain (full fidelity); in the binary their
// secret fields are sealed on the way down by secrets/sealed_backend.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "services/controlplane/state/table.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane {

struct Mutation {
  Table table;
  std::string key;
  std::optional<std::string> value;  // storage JSON text; nullopt deletes the row
};

struct Transaction {
  std::uint64_t index = 0;  // the state index after this transaction
  std::vector<Mutation> mutations;
  // Tables this transaction changes; their index becomes `index`. Kept by the backend because a
  // deletion leaves no row to recompute it from, and blocking queries must never see it go back.
  std::vector<Table> tables;
};

struct Snapshot {
  std::uint64_t index = 0;
  std::map<Table, std::uint64_t> table_index;
  std::map<Table, std::map<std::string, std::string>> rows;  // table -> key -> value
};

class StateBackend {
 public:
  virtual ~StateBackend() = default;
  // Everything durable so far.
  virtual domain::Expected<Snapshot> load() = 0;
  // Durable (survives kill -9 and power loss as far as the medium allows) when it returns ok;
  // all mutations apply or none.
  virtual domain::Status apply(const Transaction& tx) = 0;
  // Group commit: the transactions in order, made durable together (SQLite: one fsync). Each is
  // still all-or-nothing; when the group fails, a prefix of it may be durable, so the caller
  // reloads to learn what is. The default writes them one by one.
  virtual domain::Status apply_group(std::span<const Transaction> txs) {
    for (const auto& tx : txs)
      if (auto st = apply(tx); !st) return st;
    return {};
  }
  // Drops what the medium may still hold of overwritten or deleted rows (SQLite: its WAL), after
  // a rewrite meant to replace their bytes (sealing plain secrets, a key rotation).
  virtual domain::Status scrub() { return {}; }
};

}  // namespace mooring::controlplane
