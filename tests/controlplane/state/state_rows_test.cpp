// The rows a commit hands the backend: each is the storage JSON of the object memory holds, the
// same bytes the nlohmann DOM's dump() wrote before the store wrote the text directly, so rows
// written by either load back to the same state.
#include "services/controlplane/state/state_store.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {
namespace {

namespace asio = boost::asio;

domain::Allocation allocation_with_events(const std::string& id) {
  auto a = fixtures::allocation(id, "n1");
  a.task = domain::Task{.command = "/bin/sh", .args = {"-c", "exit 0"}, .secret_env = {{"TOKEN", "t-1"}}};
  for (int i = 0; i < 50; ++i)
    a.events.push_back({domain::from_unix_ms(1'700'000'000'000 + i), "Status", "event \"" + std::to_string(i) + "\"\n"});
  return a;
}

class StateRowsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }
  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(StateRowsTest, EveryRowIsTheDomDumpOfWhatMemoryHolds) {
  Batch b;
  auto v = fixtures::volume("v1");
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  b.put(v);
  domain::Node n;
  n.id = "n1";
  n.status = domain::NodeStatus::ready;
  fixtures::put_running(b, {fixtures::plugin("hostpath", "n1")}, nullptr, {n});
  b.put(allocation_with_events("a1"));
  b.add_event({.topic = "Allocation", .type = "Submitted", .key = "a1", .details = {{"why", "tab\there"}}});
  ASSERT_TRUE(store.commit(std::move(b)));

  const auto& rows = backend.snapshot.rows;
  EXPECT_EQ(rows.at(Table::volumes).at("v1"), domain::to_storage_json(*store.volume("v1")).dump());
  EXPECT_EQ(rows.at(Table::plugins).at("hostpath"), domain::to_storage_json(*store.plugin("hostpath")).dump());
  EXPECT_EQ(rows.at(Table::nodes).at("n1"), domain::to_storage_json(*store.node("n1")).dump());
  EXPECT_EQ(rows.at(Table::allocations).at("a1"), domain::to_storage_json(*store.allocation("a1")).dump());
  ASSERT_EQ(rows.at(Table::events).size(), 1u);
  EXPECT_EQ(rows.at(Table::events).begin()->second, domain::to_storage_json(store.events().back()).dump());

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(*again.allocation("a1"), *store.allocation("a1"));
  EXPECT_EQ(*again.volume("v1"), *store.volume("v1"));
  EXPECT_EQ(again.events().back(), store.events().back());
}

TEST_F(StateRowsTest, RowsTheDomWroteLoadAndAreRewrittenAsTheSameBytes) {
  auto old = allocation_with_events("a1");
  old.create_index = old.modify_index = 7;
  backend.snapshot.rows[Table::allocations]["a1"] = domain::to_storage_json(old).dump();
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  ASSERT_NE(again.allocation("a1"), nullptr);
  EXPECT_EQ(*again.allocation("a1"), old);

  auto next = *again.allocation("a1");
  next.client_status = domain::ClientStatus::running;
  Batch b;
  b.put(next);
  auto index = again.commit(std::move(b));
  ASSERT_TRUE(index);
  next.modify_index = *index;
  EXPECT_EQ(backend.snapshot.rows[Table::allocations]["a1"], domain::to_storage_json(next).dump());
}

TEST_F(StateRowsTest, ASnapshotRecordRoundTripsIsErasedAndABadOneFailsTheLoadNamingIt) {
  const SnapshotRecord r{.plugin_id = "hostpath",
                         .id = "snap/1",  // a plugin's id may hold '/': the key still has one owner
                         .ns = "team-a",
                         .source_volume_id = "data",
                         .external_source_volume_id = "ext-data",
                         .name = "nightly",
                         .group_snapshot_id = "group-1",
                         .create_time = domain::from_unix_ms(1'700'000'000'000)};
  Batch b;
  b.put(r);
  ASSERT_TRUE(store.commit(std::move(b)));
  ASSERT_EQ(backend.snapshot.rows.at(Table::snapshots).count("hostpath/snap/1"), 1u);
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  ASSERT_NE(again.snapshot_record("hostpath", "snap/1"), nullptr);
  EXPECT_EQ(*again.snapshot_record("hostpath", "snap/1"), *store.snapshot_record("hostpath", "snap/1"));
  EXPECT_EQ(again.snapshot_record("hostpath", "snap/1")->name, "nightly");
  EXPECT_GT(again.table_index(Table::snapshots), 0u);

  Batch erase;
  erase.erase_snapshot("hostpath", "snap/1");
  ASSERT_TRUE(store.commit(std::move(erase)));
  EXPECT_EQ(store.snapshot_record("hostpath", "snap/1"), nullptr);
  EXPECT_EQ(backend.snapshot.rows[Table::snapshots].count("hostpath/snap/1"), 0u);

  // A record without its namespace would belong to nobody: the load fails, naming the row.
  backend.snapshot.rows[Table::snapshots]["hostpath/snap-2"] = R"({"PluginID":"hostpath","ID":"snap-2","Namespace":""})";
  StateStore broken{io.get_executor(), backend};
  auto st = broken.load();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("snapshots row \"hostpath/snap-2\""), std::string::npos) << st.error();
}

}  // namespace
}  // namespace mooring::controlplane
