// The state store and namespaces: one volume id in two namespaces is two rows with two keys; a
// row written before namespaces existed loads into "default" under the key it always had; a row
// whose key is not its volume's key fails the load; allocation names count per namespace.
#include "services/controlplane/state/state_store.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/domain/json.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane {

namespace {

domain::Volume volume_in(const std::string& ns, const std::string& id) {
  auto v = fixtures::volume(id);
  v.ns = ns;
  v.external_id = ns + "-" + id;
  return v;
}

class StateNamespacesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }
  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(StateNamespacesTest, OneIdInTwoNamespacesIsTwoRows) {
  Batch b;
  b.put(volume_in("default", "data"));
  b.put(volume_in("team-a", "data"));
  ASSERT_TRUE(store.commit(std::move(b)));
  ASSERT_EQ(backend.snapshot.rows[Table::volumes].size(), 2u);
  EXPECT_TRUE(backend.snapshot.rows[Table::volumes].contains("data"));
  EXPECT_TRUE(backend.snapshot.rows[Table::volumes].contains("team-a:data"));
  EXPECT_EQ(store.volume("default", "data")->external_id, "default-data");
  EXPECT_EQ(store.volume("team-a", "data")->external_id, "team-a-data");
  EXPECT_EQ(store.volume("team-b", "data"), nullptr);

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.volume("team-a", "data")->ns, "team-a");
  EXPECT_EQ(again.volume("data")->ns, "default");

  Batch erase;
  erase.erase_volume(domain::volume_key("team-a", "data"));
  ASSERT_TRUE(store.commit(std::move(erase)));
  EXPECT_EQ(store.volume("team-a", "data"), nullptr);
  EXPECT_NE(store.volume("default", "data"), nullptr);
}

TEST_F(StateNamespacesTest, RowsFromBeforeNamespacesLoadIntoDefault) {
  auto stored = domain::to_storage_json(fixtures::volume("legacy"));
  stored.erase("Namespace");
  backend.snapshot.rows[Table::volumes]["legacy"] = stored.dump();
  auto alloc = domain::to_storage_json(fixtures::allocation("a1", "n1"));
  alloc.erase("Namespace");
  backend.snapshot.rows[Table::allocations]["a1"] = alloc.dump();
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  ASSERT_NE(again.volume("default", "legacy"), nullptr);
  EXPECT_EQ(again.volume("default", "legacy")->ns, "default");
  EXPECT_EQ(again.allocation("a1")->ns, "default");
  EXPECT_EQ(again.allocation_ids_named("default", "web").size(), 1u);
}

TEST_F(StateNamespacesTest, ARowUnderAnotherKeyThanItsVolumesFailsTheLoad) {
  backend.snapshot.rows[Table::volumes]["data"] = domain::to_storage_json(volume_in("team-a", "data")).dump();
  StateStore again{io.get_executor(), backend};
  auto st = again.load();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error(), "state: volumes row \"data\" holds volume \"data\" of namespace \"team-a\"");
}

TEST_F(StateNamespacesTest, AllocationNamesCountPerNamespace) {
  auto a = fixtures::allocation("a1", "n1");
  auto b = fixtures::allocation("b1", "n1");
  b.ns = "team-a";
  Batch batch;
  batch.put(a);
  batch.put(b);
  ASSERT_TRUE(store.commit(std::move(batch)));
  EXPECT_EQ(store.allocation_ids_named("default", "web"), (std::set<std::string>{"a1"}));
  EXPECT_EQ(store.allocation_ids_named("team-a", "web"), (std::set<std::string>{"b1"}));
}

}  // namespace
}  // namespace mooring::controlplane
