// The SQLite backend on a real file: durability settings, permissions, exclusivity, round trips.
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"

#include <boost/asio/io_context.hpp>

#include "services/controlplane/state/state_store.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mooring::controlplane {

class SqliteBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mooring-cp-sqlite-XXXXXX";
    ASSERT_TRUE(::mkdtemp(tmpl));
    dir = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
};

TEST_F(SqliteBackendTest, RoundTripsRowsAndIndex) {
  {
    auto b = SqliteBackend::open(dir / "data");
    ASSERT_TRUE(b) << b.error();
    Transaction tx{1, {{Table::volumes, "v1", R"({"ID":"v1"})"}, {Table::plugins, "p", R"({"ID":"p"})"}}};
    ASSERT_TRUE((*b)->apply(tx));
    Transaction tx2{2, {{Table::plugins, "p", std::nullopt}, {Table::events, "e1", "{}"}}};
    ASSERT_TRUE((*b)->apply(tx2));
  }
  auto b = SqliteBackend::open(dir / "data");
  ASSERT_TRUE(b) << b.error();
  auto snap = (*b)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 2u);
  EXPECT_EQ(snap->rows[Table::volumes]["v1"], R"({"ID":"v1"})");
  EXPECT_TRUE(snap->rows[Table::plugins].empty());
  EXPECT_EQ(snap->rows[Table::events].size(), 1u);
}

TEST_F(SqliteBackendTest, FilesArePrivateAndDurabilityIsFull) {
  auto b = SqliteBackend::open(dir / "data");
  ASSERT_TRUE(b) << b.error();
  ASSERT_TRUE((*b)->apply(Transaction{1, {{Table::volumes, "v1", "{}"}}}));
  struct stat st {};
  ASSERT_EQ(::stat((dir / "data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir / "data" / "state.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (::stat((dir / "data" / "state.db-wal").c_str(), &st) == 0) {
    EXPECT_EQ(st.st_mode & 0077, 0u);
  }
}

TEST_F(SqliteBackendTest, SecondOpenOfTheSameDataDirIsRefused) {
  auto first = SqliteBackend::open(dir / "data");
  ASSERT_TRUE(first) << first.error();
  auto second = SqliteBackend::open(dir / "data");
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find("a control plane of data dir"), std::string::npos) << second.error();
  EXPECT_NE(second.error().find("is already running (pid " + std::to_string(::getpid())), std::string::npos)
      << second.error();
  first->reset();  // released with the backend
  EXPECT_TRUE(SqliteBackend::open(dir / "data"));
}

TEST_F(SqliteBackendTest, TableIndexesArePersisted) {
  {
    auto b = SqliteBackend::open(dir / "data");
    ASSERT_TRUE(b) << b.error();
    ASSERT_TRUE((*b)->apply(Transaction{1, {{Table::volumes, "v1", "{}"}}, {Table::volumes}}));
    ASSERT_TRUE((*b)->apply(Transaction{2, {{Table::volumes, "v1", std::nullopt}}, {Table::volumes, Table::events}}));
  }
  auto b = SqliteBackend::open(dir / "data");
  ASSERT_TRUE(b) << b.error();
  auto snap = (*b)->load();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->table_index[Table::volumes], 2u);
  EXPECT_EQ(snap->table_index[Table::events], 2u);
  EXPECT_EQ(snap->table_index.count(Table::plugins), 0u);
}

TEST_F(SqliteBackendTest, UnwritableDataDirIsAnErrorNamingThePath) {
  auto b = SqliteBackend::open("/proc/mooring-nope/data");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().find("/proc/mooring-nope/data"), std::string::npos);
}

TEST_F(SqliteBackendTest, AclRecordsSurviveARestartAndBootstrapStaysDoneAfterEveryTokenIsDeleted) {
  acl::Token t;
  t.accessor_id = "acc-1";
  t.secret_hash = "ab12";
  t.name = "ops";
  t.policies = {"reader"};
  t.create_time = domain::from_unix_ms(1000);
  auto policy = acl::parse_policy(nlohmann::json::parse(R"({"Rules":{"Namespace":{"*":{"Policy":"read"}},"Node":"read"}})"),
                                  "reader");
  ASSERT_TRUE(policy) << policy.error();
  boost::asio::io_context io;
  {
    auto b = SqliteBackend::open(dir / "data");
    ASSERT_TRUE(b) << b.error();
    StateStore store{io.get_executor(), **b};
    ASSERT_TRUE(store.load());
    EXPECT_FALSE(store.acl_bootstrapped());
    Batch batch;
    batch.put(*policy);
    batch.put(t);
    ASSERT_TRUE(store.commit(std::move(batch)));
  }
  {
    auto b = SqliteBackend::open(dir / "data");
    ASSERT_TRUE(b) << b.error();
    StateStore store{io.get_executor(), **b};
    ASSERT_TRUE(store.load());
    ASSERT_NE(store.acl_policy("reader"), nullptr);
    EXPECT_EQ(store.acl_policy("reader")->namespaces, policy->namespaces);
    const auto* found = store.acl_token_by_secret_hash("ab12");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, "ops");
    EXPECT_TRUE(store.acl_bootstrapped());
    Batch batch;
    batch.erase_acl_token("acc-1");
    ASSERT_TRUE(store.commit(std::move(batch)));
    EXPECT_EQ(store.acl_token_by_secret_hash("ab12"), nullptr);
  }
  auto b = SqliteBackend::open(dir / "data");
  ASSERT_TRUE(b) << b.error();
  StateStore store{io.get_executor(), **b};
  ASSERT_TRUE(store.load());
  EXPECT_TRUE(store.acl_tokens().empty());
  EXPECT_TRUE(store.acl_bootstrapped());  // deleting every token does not reopen bootstrap
}

}  // namespace mooring::controlplane
