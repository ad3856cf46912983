// Namespace records in the state: the row is the API's JSON, a record survives a restart in both
// backends (SQLite on a file, etcd started per test), a row that does not decode fails the load
// naming it, and the request body is checked field by field.
#include <functional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/namespace_record.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/real_backends.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {
namespace {

namespace asio = boost::asio;
using json = nlohmann::json;
using namespace std::chrono_literals;

NamespaceRecord team_a() {
  return NamespaceRecord{.name = "team-a",
                         .description = "the A team",
                         .quota = {.max_volumes = 3, .max_capacity_bytes = 0, .max_running_allocations = std::nullopt}};
}

// Commits a record and a deletion through a store on one backend, then loads a second store from
// a backend opened again (a restart, or a new leader on etcd).
void round_trip(const std::function<std::unique_ptr<StateBackend>()>& open) {
  asio::io_context io;
  {
    auto backend = open();
    ASSERT_TRUE(backend);
    StateStore store{io.get_executor(), *backend};
    ASSERT_TRUE(store.load());
    Batch b;
    b.put(team_a());
    b.put(NamespaceRecord{.name = "team-b"});
    ASSERT_TRUE(store.commit(std::move(b)));
    Batch gone;
    gone.erase_namespace("team-b");
    ASSERT_TRUE(store.commit(std::move(gone)));
  }
  auto backend = open();
  ASSERT_TRUE(backend);
  StateStore again{io.get_executor(), *backend};
  ASSERT_TRUE(again.load());
  ASSERT_NE(again.namespace_record("team-a"), nullptr);
  auto expected = team_a();
  expected.create_index = expected.modify_index = 1;
  EXPECT_EQ(*again.namespace_record("team-a"), expected);
  EXPECT_EQ(again.namespace_record("team-b"), nullptr);
  EXPECT_EQ(again.namespace_records().size(), 1u);
  EXPECT_EQ(again.table_index(Table::namespaces), 2u);  // the deletion moved it
}

// The backend as `open` hands it out, or null after a test failure naming why.
TEST(NamespaceState, TheRowIsTheApisJsonAndAnAbsentLimitIsNull) {
  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  ASSERT_TRUE(store.load());
  Batch b;
  b.put(team_a());
  ASSERT_TRUE(store.commit(std::move(b)));
  auto row = json::parse(backend.snapshot.rows.at(Table::namespaces).at("team-a"));
  EXPECT_EQ(row["Name"], "team-a");
  EXPECT_EQ(row["Quota"]["MaxVolumes"], 3);
  EXPECT_EQ(row["Quota"]["MaxCapacityBytes"], 0);  // none may be added: not "no limit"
  EXPECT_TRUE(row["Quota"]["MaxRunningAllocations"].is_null());
  EXPECT_EQ(row, to_json(*store.namespace_record("team-a")));
}

TEST(NamespaceState, RecordsSurviveARestartOnSqlite) {
  test::TempDir dir{"mooring-ns-sqlite"};
  round_trip([&] { return fixtures::open_sqlite(dir.path() / "data"); });
}

TEST(NamespaceState, RecordsSurviveARestartOnEtcd) {
  if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir{"mooring-ns-etcd"};
  test::EtcdProcess etcd{dir.path() / "etcd"};
  etcd.start();
  const auto o = fixtures::etcd_options(etcd, "/ns-test");
  round_trip([&] { return fixtures::open_etcd(o); });
}

TEST(NamespaceState, ARowThatDoesNotDecodeFailsTheLoadNamingIt) {
  asio::io_context io;
  FakeBackend backend;
  backend.snapshot.rows[Table::namespaces]["bad"] = R"({"Name":"bad name"})";
  StateStore store{io.get_executor(), backend};
  auto st = store.load();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("namespaces row \"bad\""), std::string::npos) << st.error();
  backend.snapshot.rows[Table::namespaces]["bad"] = R"({"Name":"bad","Quota":{"MaxVolumes":-1}})";
  st = store.load();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("Quota.MaxVolumes"), std::string::npos) << st.error();
}

TEST(NamespaceState, TheRequestBodyIsCheckedFieldByField) {
  auto ok = namespace_record_from_request("team-a", json{{"Description", "d"}, {"Quota", {{"MaxVolumes", 2}}}});
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->quota.max_volumes, 2);
  EXPECT_FALSE(ok->quota.max_capacity_bytes);
  EXPECT_TRUE(namespace_record_from_request("team-a", json::object()));
  EXPECT_TRUE(namespace_record_from_request("team-a", json{{"Name", "team-a"}, {"Quota", nullptr}}));
  const std::vector<std::pair<json, std::string>> bad{
      {json::array(), "must be a JSON object"},
      {json{{"Name", "team-b"}}, "field \"Name\": must match the path's namespace \"team-a\""},
      {json{{"Description", 5}}, "field \"Description\": must be a string"},
      {json{{"Description", std::string(1025, 'x')}}, "longer than 1024 bytes"},
      {json{{"Quota", 3}}, "field \"Quota\": must be an object"},
      {json{{"Quota", {{"MaxVolumes", -1}}}}, "field \"Quota.MaxVolumes\": must be a non-negative integer or null"},
      {json{{"Quota", {{"MaxCapacityBytes", 1.5}}}}, "field \"Quota.MaxCapacityBytes\""},
      {json{{"Quota", {{"MaxRunningAllocations", "3"}}}}, "field \"Quota.MaxRunningAllocations\""},
      {json{{"Quota", {{"MaxVolume", 3}}}}, "field \"Quota.MaxVolume\": unknown"},
      {json{{"Quotas", {}}}, "field \"Quotas\": unknown"},
  };
  for (const auto& [body, want] : bad) {
    auto r = namespace_record_from_request("team-a", body);
    ASSERT_FALSE(r) << body.dump();
    EXPECT_NE(r.error().find(want), std::string::npos) << body.dump() << ": " << r.error();
  }
}

}  // namespace
}  // namespace mooring::controlplane
