// State room: the SQLite StateBackend. One file `state.db` under the data dir, WAL mode with
// synchronous=FULL (a committed transaction is on disk before apply() returns), created 0600
// because rows carry volume secrets, and guarded by an flock on `<data-dir>/lock` so two control
// planes cannot share it.
#pragma once

#include <filesystem>
#include <memory>

#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane {

class SqliteBackend final : public StateBackend {
 public:
  // Creates the directory (0700) and database (0600) when missing. Errors name the path.
  static domain::Expected<std::unique_ptr<SqliteBackend>> open(const std::filesystem::path& data_dir);
  ~SqliteBackend() override;

  domain::Expected<Snapshot> load() override;
  domain::Status apply(const Transaction& tx) override;
  domain::Status apply_group(std::span<const Transaction> txs) override;  // one SQLite transaction
  // secure_delete is on, so replaced rows are zeroed in their pages; this checkpoints the WAL
  // into the database and truncates it, so no older page version stays in either file.
  domain::Status scrub() override;

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Db;
  SqliteBackend(std::filesystem::path path, std::unique_ptr<Db> db);
  domain::Status write(const Transaction& tx);  // inside an open SQLite transaction
  std::filesystem::path path_;
  std::unique_ptr<Db> db_;
};

}  // namespace mooring::controlplane
