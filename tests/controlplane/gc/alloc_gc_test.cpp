// The allocation GC: terminal, claim-free allocations are deleted once they have been so for the
// threshold; anything running, or still named by a claim (past claims too), stays.
#include "services/controlplane/gc/alloc_gc.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane::gc {
namespace {

using namespace std::chrono_literals;
using domain::ClientStatus;

class AllocGcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store.load());
    Batch b;
    for (auto [id, status] : {std::pair{"done", ClientStatus::complete}, {"failed", ClientStatus::failed},
                              {"lost", ClientStatus::lost}, {"running", ClientStatus::running},
                              {"releasing", ClientStatus::complete}}) {
      auto a = fixtures::allocation(id, "n1");
      a.client_status = status;
      b.put(a);
    }
    // "releasing" still has a past claim: the claim GC needs its allocation.
    auto v = fixtures::volume("v1");
    v.claims["releasing"] = fixtures::claim("releasing", "n1", domain::ClaimState::node_detached);
    b.put(v);
    ASSERT_TRUE(store.commit(std::move(b)));
  }

  std::set<std::string> ids() const {
    std::set<std::string> out;
    for (const auto& [id, a] : store.allocations()) out.insert(id);
    return out;
  }

  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  AllocGc::Clock::time_point t0 = AllocGc::Clock::now();
};

TEST_F(AllocGcTest, DeletesTerminalClaimFreeAllocationsOnlyAfterTheThreshold) {
  AllocGc gc(io.get_executor(), store, {.threshold = 1h});
  EXPECT_EQ(gc.collect(t0), 0u);
  EXPECT_EQ(gc.waiting(), 3u);  // done, failed, lost
  EXPECT_EQ(gc.collect(t0 + 59min), 0u);
  EXPECT_EQ(gc.collect(t0 + 1h), 3u);
  EXPECT_EQ(ids(), (std::set<std::string>{"running", "releasing"}));
  // One cluster event for the batch, and the rows are gone from the backend too.
  EXPECT_EQ(store.events().back().type, "AllocationsCollected");
  EXPECT_EQ(store.events().back().details.at("count"), "3");
  EXPECT_FALSE(backend.snapshot.rows[Table::allocations].contains("done"));
}

TEST_F(AllocGcTest, TheClockStartsWhenAnAllocationBecomesCollectable) {
  AllocGc gc(io.get_executor(), store, {.threshold = 1h});
  gc.collect(t0);
  // Its last claim is freed at t0 + 50 min: "releasing" waits its own full hour from then.
  auto v = *store.volume("v1");
  v.claims.clear();
  Batch b;
  b.put(v);
  ASSERT_TRUE(store.commit(std::move(b)));
  EXPECT_EQ(gc.collect(t0 + 50min), 0u);
  EXPECT_EQ(gc.collect(t0 + 1h), 3u);
  EXPECT_TRUE(store.allocation("releasing"));
  EXPECT_EQ(gc.collect(t0 + 1h + 50min), 1u);
  EXPECT_EQ(ids(), std::set<std::string>{"running"});
}

TEST_F(AllocGcTest, AFailedWriteDeletesNothingAndIsRetried) {
  AllocGc gc(io.get_executor(), store, {.threshold = 1min});
  gc.collect(t0);
  backend.fail_apply = true;
  EXPECT_EQ(gc.collect(t0 + 2min), 0u);
  EXPECT_EQ(ids().size(), 5u);
  backend.fail_apply = false;
  EXPECT_EQ(gc.collect(t0 + 3min), 3u);
}

TEST_F(AllocGcTest, DeletesInBatches) {
  Batch b;
  for (int i = 0; i < 25; ++i) {
    auto a = fixtures::allocation("old-" + std::to_string(i), "n1");
    a.client_status = ClientStatus::complete;
    b.put(a);
  }
  ASSERT_TRUE(store.commit(std::move(b)));
  AllocGc gc(io.get_executor(), store, {.threshold = 1min, .batch = 10});
  gc.collect(t0);
  const auto writes = backend.transactions.size();
  EXPECT_EQ(gc.collect(t0 + 1min), 28u);
  EXPECT_EQ(backend.transactions.size() - writes, 3u);  // 10 + 10 + 8
}

TEST_F(AllocGcTest, TheLoopRunsUntilStopped) {
  AllocGc gc(io.get_executor(), store, {.threshold = 1ms, .period = 10ms});
  gc.start();
  io.run_for(300ms);
  EXPECT_EQ(ids(), (std::set<std::string>{"running", "releasing"}));
  auto stopped = boost::asio::co_spawn(io, gc.stop(), boost::asio::use_future);
  io.restart();
  io.run_for(1s);
  stopped.get();
}

}  // namespace
}  // namespace mooring::controlplane::gc
