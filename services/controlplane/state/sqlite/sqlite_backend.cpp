#include "services/controlplane/state/sqlite/sqlite_backend.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "shared/durable/instance_lock.hpp"

namespace mooring::controlplane {

namespace {

std::string sqlite_error(sqlite3* db, std::string_view what) {
  return std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
}

}  // namespace

struct SqliteBackend::Db {
  std::optional<durable::InstanceLock> lock;  // held for the life of the backend
  sqlite3* db = nullptr;
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_stmt* set_index = nullptr;

  ~Db() {
    sqlite3_finalize(put);
    sqlite3_finalize(del);
    sqlite3_finalize(set_index);
    if (db) sqlite3_close(db);
  }

  domain::Status exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errmsg(db);
      sqlite3_free(err);
      return domain::error(std::string("sqlite: ") + msg + " (" + sql + ")");
    }
    return {};
  }
};

SqliteBackend::SqliteBackend(std::filesystem::path path, std::unique_ptr<Db> db)
    : path_(std::move(path)), db_(std::move(db)) {}

SqliteBackend::~SqliteBackend() = default;

domain::Expected<std::unique_ptr<SqliteBackend>> SqliteBackend::open(const std::filesystem::path& data_dir) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return domain::error("cannot create data dir " + data_dir.string() + ": " + ec.message());
  ::chmod(data_dir.c_str(), 0700);
  auto db = std::make_unique<Db>();
  auto lock = durable::InstanceLock::acquire(data_dir / "lock", "a control plane of data dir " + data_dir.string());
  if (!lock) return domain::error(lock.error());
  db->lock = std::move(*lock);
  auto path = data_dir / "state.db";
  // Create the file ourselves so it is 0600 from the first byte; SQLite gives its -wal and
  // -shm files the database file's permissions.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return domain::error("cannot open " + path.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  ::close(fd);

  if (sqlite3_open_v2(path.c_str(), &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK)
    return domain::error("cannot open " + path.string() + ": " + sqlite_error(db->db, "sqlite"));
  sqlite3_busy_timeout(db->db, 0);
  for (const char* sql : {
           "PRAGMA journal_mode=WAL",
           "PRAGMA synchronous=FULL",
           // Deleted and replaced content is overwritten with zeros, not left in free space:
           // rows once held secrets in plain text (before sealing, see secrets/).
           "PRAGMA secure_delete=ON",
           "CREATE TABLE IF NOT EXISTS rows (tbl TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
           "PRIMARY KEY (tbl, key)) WITHOUT ROWID",
           "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
       }) {
    if (auto st = db->exec(sql); !st) return domain::error(path.string() + ": " + st.error());
  }
  auto prepare = [&](const char* sql, sqlite3_stmt** out) -> domain::Status {
    if (sqlite3_prepare_v2(db->db, sql, -1, out, nullptr) != SQLITE_OK)
      return domain::error(path.string() + ": " + sqlite_error(db->db, "prepare"));
    return {};
  };
  if (auto st = prepare("INSERT OR REPLACE INTO rows (tbl, key, value) VALUES (?, ?, ?)", &db->put); !st)
    return domain::error(st.error());
  if (auto st = prepare("DELETE FROM rows WHERE tbl = ? AND key = ?", &db->del); !st) return domain::error(st.error());
  if (auto st = prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", &db->set_index); !st)
    return domain::error(st.error());
  return std::unique_ptr<SqliteBackend>(new SqliteBackend(path, std::move(db)));
}

domain::Expected<Snapshot> SqliteBackend::load() {
  Snapshot snap;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_->db, "SELECT key, value FROM meta", -1, &stmt, nullptr) != SQLITE_OK)
    return domain::error(path_.string() + ": " + sqlite_error(db_->db, "load"));
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    std::string key = p ? p : "";
    auto value = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 1));
    if (key == "index") {
      snap.index = value;
    } else if (key.rfind("index:", 0) == 0) {
      if (auto t = parse_table(key.substr(6))) snap.table_index[*t] = value;
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return domain::error(path_.string() + ": " + sqlite_error(db_->db, "load"));

  if (sqlite3_prepare_v2(db_->db, "SELECT tbl, key, value FROM rows", -1, &stmt, nullptr) != SQLITE_OK)
    return domain::error(path_.string() + ": " + sqlite_error(db_->db, "load"));
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    auto text = [&](int col) {
      auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
      return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(stmt, col)));
    };
    auto table = parse_table(text(0));
    if (!table) continue;  // a table a newer version added; not ours to interpret
    snap.rows[*table][text(1)] = text(2);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return domain::error(path_.string() + ": " + sqlite_error(db_->db, "load"));
  return snap;
}

domain::Status SqliteBackend::apply(const Transaction& tx) { return apply_group({&tx, 1}); }

domain::Status SqliteBackend::apply_group(std::span<const Transaction> txs) {
  if (txs.empty()) return {};
  if (auto st = db_->exec("BEGIN IMMEDIATE"); !st) return st;
  for (const auto& tx : txs) {
    if (auto st = write(tx); !st) {
      (void)db_->exec("ROLLBACK");  // best effort: the error that matters is the first one
      return st;
    }
  }
  if (auto st = db_->exec("COMMIT"); !st) {
    (void)db_->exec("ROLLBACK");  // best effort: the error that matters is the first one
    return st;
  }
  return {};
}

domain::Status SqliteBackend::scrub() {
  if (auto st = db_->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !st)
    return domain::error(path_.string() + ": " + st.error());
  return {};
}

domain::Status SqliteBackend::write(const Transaction& tx) {
  auto fail = [&](std::string_view what) { return domain::error(path_.string() + ": " + sqlite_error(db_->db, what)); };
  for (const auto& m : tx.mutations) {
    auto tbl = to_string(m.table);
    sqlite3_stmt* stmt = m.value ? db_->put : db_->del;
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, tbl.data(), static_cast<int>(tbl.size()), SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, m.key.data(), static_cast<int>(m.key.size()), SQLITE_STATIC);
    if (m.value) sqlite3_bind_text(stmt, 3, m.value->data(), static_cast<int>(m.value->size()), SQLITE_STATIC);
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) return fail("write");
  }
  std::vector<std::string> keys{"index"};
  for (auto t : tx.tables) keys.push_back("index:" + std::string(to_string(t)));
  for (const auto& key : keys) {
    sqlite3_reset(db_->set_index);
    sqlite3_bind_text(db_->set_index, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_int64(db_->set_index, 2, static_cast<sqlite3_int64>(tx.index));
    int rc = sqlite3_step(db_->set_index);
    sqlite3_reset(db_->set_index);
    if (rc != SQLITE_DONE) return fail("write index");
  }
  return {};
}

}  // namespace mooring::controlplane
