// The allocations room without HTTP: a submit is refused (invalid, conflict) before anything is
// written, a placed one is one commit with its node; a stop is idempotent and takes a group's
// copies; a rolling update refuses what is not a plugin allocation and replaces one beside itself.
#include "services/controlplane/allocations/allocations.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane::allocations {
namespace {

using Kind = Failure::Kind;

class AllocationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store.load());
    Batch b;
    auto plugin = fixtures::plugin("hostpath", "node-1");
    b.put(fixtures::ready_node(plugin, "node-1"));  // the plugin's aggregate follows its instance
    b.put(fixtures::volume("data"));
    ASSERT_TRUE(store.commit(std::move(b)));
  }

  domain::Allocation request(const std::string& volume) {
    domain::Allocation a;
    a.name = "web";
    a.ns = "default";
    domain::VolumeRequest v;
    v.source = volume;
    v.access_mode = domain::AccessMode::single_node_writer;
    v.attachment_mode = domain::AttachmentMode::file_system;
    a.volumes["data"] = v;
    return a;
  }

  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(AllocationsTest, SubmitRefusesAMissingVolumeOrNodeAndWritesNothing) {
  const auto before = backend.transactions.size();
  auto missing = submit(store, request("nope"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, Kind::invalid);
  EXPECT_NE(missing.error().message.find("volume not found: nope"), std::string::npos) << missing.error().message;
  auto elsewhere = request("data");
  elsewhere.node_id = "node-9";
  auto no_node = submit(store, elsewhere);
  ASSERT_FALSE(no_node);
  EXPECT_EQ(no_node.error().message, "allocation \"web\": field \"NodeID\": node not found: node-9");
  EXPECT_EQ(backend.transactions.size(), before);
  EXPECT_TRUE(store.allocations().empty());
}

TEST_F(AllocationsTest, SubmitPlacesAndStopIsIdempotent) {
  auto placed = submit(store, request("data"));
  ASSERT_TRUE(placed) << placed.error().message;
  EXPECT_EQ(placed->node_id, "node-1");
  const auto* a = store.allocation(placed->id);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->desired_status, domain::DesiredStatus::run);
  auto stopped = stop(store, *a);
  ASSERT_TRUE(stopped);
  EXPECT_FALSE(stopped->group);
  EXPECT_EQ(store.allocation(placed->id)->desired_status, domain::DesiredStatus::stop);
  const auto writes = backend.transactions.size();
  auto again = stop(store, *store.allocation(placed->id));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->index, store.allocation(placed->id)->modify_index);
  EXPECT_EQ(backend.transactions.size(), writes) << "a second stop writes nothing";
}

TEST_F(AllocationsTest, UpdateRefusesAnAllocationWithoutAPluginTask) {
  auto placed = submit(store, request("data"));
  ASSERT_TRUE(placed);
  const auto writes = backend.transactions.size();
  auto updated = update_task(store, *store.allocation(placed->id), domain::Task{.command = "/bin/true"});
  ASSERT_FALSE(updated);
  EXPECT_EQ(updated.error().kind, Kind::invalid);
  EXPECT_NE(updated.error().message.find("only plugin allocations"), std::string::npos) << updated.error().message;
  EXPECT_EQ(backend.transactions.size(), writes);
}

}  // namespace
}  // namespace mooring::controlplane::allocations
