// The state store: indexes, durability order (backend first, memory second), reload, watches.
#include "services/controlplane/state/state_store.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;
using namespace std::chrono_literals;

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }

  std::uint64_t commit(Batch b) {
    auto r = store.commit(std::move(b));
    EXPECT_TRUE(r) << (r ? "" : r.error());
    return r ? *r : 0;
  }

  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(StateStoreTest, EachCommitTakesTheNextIndexAndStampsObjects) {
  Batch b;
  b.put(fixtures::volume("v1"));
  EXPECT_EQ(commit(std::move(b)), 1u);
  Batch b2;
  auto v = *store.volume("v1");
  v.name = "renamed";
  b2.put(v);
  b2.put(fixtures::allocation("a1"));
  EXPECT_EQ(commit(std::move(b2)), 2u);
  EXPECT_EQ(store.volume("v1")->create_index, 1u);
  EXPECT_EQ(store.volume("v1")->modify_index, 2u);
  EXPECT_EQ(store.volume("v1")->name, "renamed");
  EXPECT_EQ(store.allocation("a1")->create_index, 2u);
  EXPECT_EQ(store.index(), 2u);
  EXPECT_EQ(store.table_index(Table::volumes), 2u);
  EXPECT_EQ(store.table_index(Table::allocations), 2u);
  EXPECT_EQ(store.table_index(Table::plugins), 0u);
}

TEST_F(StateStoreTest, FailedBackendWriteChangesNothing) {
  Batch b;
  b.put(fixtures::volume("v1"));
  commit(std::move(b));
  backend.fail_apply = true;
  Batch b2;
  b2.erase_volume("v1");
  b2.put(fixtures::volume("v2"));
  b2.add_event({.topic = "Volume", .type = "Deregistered", .key = "v1"});
  auto r = store.commit(std::move(b2));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("disk full"), std::string::npos);
  EXPECT_TRUE(store.volume("v1"));
  EXPECT_FALSE(store.volume("v2"));
  EXPECT_TRUE(store.events().empty());
  EXPECT_EQ(store.index(), 1u);
}

TEST_F(StateStoreTest, WritesAreOneTransactionWithEveryRow) {
  Batch b;
  b.put(fixtures::volume("v1"));
  fixtures::put_running(b, {fixtures::plugin()});  // the node and the plugin's row
  b.add_event({.topic = "Volume", .type = "Registered", .key = "v1"});
  commit(std::move(b));
  ASSERT_EQ(backend.transactions.size(), 1u);
  EXPECT_EQ(backend.transactions[0].index, 1u);
  EXPECT_EQ(backend.transactions[0].mutations.size(), 4u);
  // Storage rows keep secrets (full fidelity); only the API redacts.
  EXPECT_NE(backend.snapshot.rows[Table::volumes]["v1"].find("hunter2"), std::string::npos);
}

TEST_F(StateStoreTest, EmptyBatchWritesNothing) {
  EXPECT_EQ(commit(Batch{}), 0u);
  EXPECT_TRUE(backend.transactions.empty());
}

TEST_F(StateStoreTest, ReloadRestoresEverything) {
  Batch b;
  auto v = fixtures::volume("v1");
  v.claims["a1"] = domain::Claim{.allocation_id = "a1",
                                 .node_id = "n1",
                                 .state = domain::ClaimState::node_detached,
                                 .last_error = "agent unreachable"};
  b.put(v);
  b.put(fixtures::allocation("a1", "n1"));
  domain::Node n;
  n.id = "n1";
  n.status = domain::NodeStatus::ready;
  fixtures::put_running(b, {fixtures::plugin("hostpath", "n1")}, nullptr, {n});
  b.add_event({.topic = "Volume", .type = "Registered", .key = "v1", .message = "registered"});
  commit(std::move(b));
  Batch b2;
  b2.add_event({.topic = "Allocation", .type = "Submitted", .key = "a1"});
  commit(std::move(b2));

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.index(), 2u);
  ASSERT_TRUE(again.volume("v1"));
  EXPECT_EQ(*again.volume("v1"), *store.volume("v1"));
  EXPECT_EQ(again.volume("v1")->claims.at("a1").last_error, "agent unreachable");
  EXPECT_EQ(again.volume("v1")->secrets.at("password"), "hunter2");
  EXPECT_EQ(*again.plugin("hostpath"), *store.plugin("hostpath"));
  EXPECT_EQ(*again.allocation("a1"), *store.allocation("a1"));
  EXPECT_EQ(*again.node("n1"), *store.node("n1"));
  ASSERT_EQ(again.events().size(), 2u);
  EXPECT_EQ(again.events()[0].type, "Registered");
  EXPECT_EQ(again.events()[1].type, "Submitted");
  EXPECT_EQ(again.table_index(Table::volumes), 1u);
  EXPECT_EQ(again.table_index(Table::events), 2u);
}

// The chaos checker orders events against plugin calls and tasks by CLOCK_MONOTONIC: each event
// carries the moment of its commit (not of its durability), and keeps it through a reload.
TEST_F(StateStoreTest, EveryEventCarriesTheMonotonicTimeOfItsCommit) {
  const auto mono = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const auto before = mono();
  Batch b;
  b.add_event({.topic = "Claim", .type = "ClaimReleased", .key = "v1"});
  b.add_event({.topic = "Claim", .type = "ClaimTaken", .key = "v2"});
  commit(std::move(b));
  const auto after = mono();
  ASSERT_EQ(store.events().size(), 2u);
  const auto stamped = store.events()[0].monotonic_ns;
  EXPECT_LE(before, stamped);
  EXPECT_LE(stamped, after);
  EXPECT_EQ(store.events()[1].monotonic_ns, stamped) << "one commit, one moment";

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  ASSERT_EQ(again.events().size(), 2u);
  EXPECT_EQ(again.events()[0].monotonic_ns, stamped);
}

// An agent's watch compares modify indexes only within one incarnation (controlplane.proto).
TEST_F(StateStoreTest, EveryLoadIsANewIncarnationAndCommitsKeepIt) {
  const auto first = store.incarnation();
  EXPECT_NE(first, 0u);
  Batch b;
  b.put(fixtures::allocation("a1", "n1"));
  commit(std::move(b));
  EXPECT_EQ(store.incarnation(), first);
  ASSERT_TRUE(store.reload());
  const auto reloaded = store.incarnation();
  EXPECT_NE(reloaded, 0u);
  EXPECT_NE(reloaded, first);
  StateStore again{io.get_executor(), backend};
  EXPECT_EQ(again.incarnation(), 0u) << "not loaded: no incarnation an agent could match";
  ASSERT_TRUE(again.load());
  EXPECT_NE(again.incarnation(), 0u);
  EXPECT_NE(again.incarnation(), reloaded);
  backend.fail_load = true;
  EXPECT_FALSE(store.reload());
  EXPECT_EQ(store.incarnation(), reloaded) << "a reload that fails changes nothing";
}

// The per-node view a node's watch and the node loss check read instead of every allocation.
TEST_F(StateStoreTest, AllocationsOfANodeFollowEveryCommitAndAReload) {
  using Ids = std::set<std::string>;
  Batch b;
  b.put(fixtures::allocation("a1", "n1"));
  b.put(fixtures::allocation("a2", "n1"));
  b.put(fixtures::allocation("a3", "n2"));
  commit(std::move(b));
  EXPECT_EQ(store.allocation_ids_on("n1"), (Ids{"a1", "a2"}));
  EXPECT_EQ(store.allocation_ids_on("n2"), (Ids{"a3"}));
  EXPECT_TRUE(store.allocation_ids_on("n9").empty());

  Batch b2;
  b2.put(fixtures::allocation("a2", "n2"));  // moved
  b2.erase_allocation("a1");
  commit(std::move(b2));
  EXPECT_TRUE(store.allocation_ids_on("n1").empty());
  EXPECT_EQ(store.allocation_ids_on("n2"), (Ids{"a2", "a3"}));

  backend.fail_apply = true;  // a failed write changes neither the table nor the view
  Batch b3;
  b3.erase_allocation("a3");
  b3.put(fixtures::allocation("a4", "n1"));
  EXPECT_FALSE(store.commit(std::move(b3)));
  EXPECT_EQ(store.allocation_ids_on("n2"), (Ids{"a2", "a3"}));
  EXPECT_TRUE(store.allocation_ids_on("n1").empty());

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.allocation_ids_on("n2"), (Ids{"a2", "a3"}));
  EXPECT_TRUE(again.allocation_ids_on("n1").empty());
}

TEST_F(StateStoreTest, VolumesByBackendFollowEveryCommitAndAReload) {
  using Keys = std::set<std::string>;
  auto v1 = fixtures::volume("v1");
  v1.provider = "hostpath.mooring.dev";
  auto other_ns = v1;
  other_ns.id = "v2";
  other_ns.ns = "team";
  auto unknown_provider = fixtures::volume("v3");  // no provider yet: keyed by its plugin id
  unknown_provider.external_id = v1.external_id;
  Batch b;
  b.put(v1);
  b.put(other_ns);
  b.put(unknown_provider);
  commit(std::move(b));
  EXPECT_EQ(store.volume_keys_with_backend(v1), (Keys{"v1", "team:v2"}));
  EXPECT_EQ(store.volume_keys_with_backend(unknown_provider), (Keys{"v3"}));

  Batch b2;
  b2.erase_volume("v1");
  commit(std::move(b2));
  EXPECT_EQ(store.volume_keys_with_backend(v1), (Keys{"team:v2"}));

  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.volume_keys_with_backend(v1), (Keys{"team:v2"}));
  EXPECT_EQ(again.volume_keys_with_backend(unknown_provider), (Keys{"v3"}));
}

// The indexes the hot paths read (a node's watch, placement's load, next_alloc_index) must say
// exactly what a scan of every allocation and volume says, after any mix of commits and a reload.
TEST_F(StateStoreTest, AllocationIndexesAgreeWithAFullScanThroughRandomCommits) {
  using Ids = std::set<std::string>;
  std::mt19937 rng(20261123);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> nodes{"n1", "n2", "n3"};
  const std::vector<std::string> names{"web", "db"};
  const std::vector<domain::ClientStatus> statuses{domain::ClientStatus::pending, domain::ClientStatus::running,
                                                   domain::ClientStatus::complete, domain::ClientStatus::failed,
                                                   domain::ClientStatus::lost};
  const std::vector<domain::ClaimState> claim_states{domain::ClaimState::taken, domain::ClaimState::node_detached,
                                                     domain::ClaimState::ready_to_free};

  auto check = [&](const StateStore& s) {
    for (const auto& node : nodes) {
      Ids all, live, claiming;
      std::uint64_t last = 0;
      const std::uint64_t after = s.index() / 2;
      Ids changed;
      for (const auto& [id, a] : s.allocations()) {
        if (a.node_id != node) continue;
        all.insert(id);
        last = std::max(last, a.modify_index);
        if (a.modify_index > after) changed.insert(id);
        if (!domain::is_terminal(a)) {
          live.insert(id);
          continue;
        }
        for (const auto& [vid, v] : s.volumes())
          if (v.claims.contains(id)) claiming.insert(id);
      }
      EXPECT_EQ(s.allocation_ids_on(node), all) << node;
      EXPECT_EQ(s.live_allocation_ids_on(node), live) << node;
      EXPECT_EQ(s.claiming_terminal_allocation_ids_on(node), claiming) << node;
      EXPECT_EQ(s.last_allocation_change_on(node), last) << node;
      auto got = s.allocation_ids_changed_on(node, after);
      EXPECT_EQ(Ids(got.begin(), got.end()), changed) << node;
    }
    for (const auto& name : names) {
      Ids named;
      for (const auto& [id, a] : s.allocations())
        if (a.name == name) named.insert(id);
      EXPECT_EQ(s.allocation_ids_named("default", name), named) << name;
    }
  };

  for (int round = 0; round < 300; ++round) {
    Batch b;
    const int writes = 1 + pick(3);
    for (int w = 0; w < writes; ++w) {
      const std::string aid = "a" + std::to_string(pick(12));
      const std::string vid = "v" + std::to_string(pick(6));
      switch (pick(4)) {
        case 0:
        case 1: {  // an allocation written: new, moved, renamed, or its status changed
          auto a = fixtures::allocation(aid, nodes[static_cast<std::size_t>(pick(3))]);
          a.name = names[static_cast<std::size_t>(pick(2))];
          a.client_status = statuses[static_cast<std::size_t>(pick(5))];
          b.put(a);
          break;
        }
        case 2: {  // a volume's claims change: one taken, moved on, or dropped
          auto v = store.volume(vid) ? *store.volume(vid) : fixtures::volume(vid);
          if (pick(3) == 0)
            v.claims.erase(aid);
          else
            v.claims[aid] = fixtures::claim(aid, nodes[static_cast<std::size_t>(pick(3))],
                                            claim_states[static_cast<std::size_t>(pick(3))]);
          b.put(v);
          break;
        }
        default:
          if (pick(2) == 0)
            b.erase_allocation(aid);
          else
            b.erase_volume(vid);
      }
    }
    commit(std::move(b));
    check(store);
  }
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  check(again);
}

TEST_F(StateStoreTest, TableIndexSurvivesADeletionAndAReload) {
  Batch b;
  b.put(fixtures::volume("v1"));
  commit(std::move(b));
  Batch b2;
  b2.erase_volume("v1");
  commit(std::move(b2));
  EXPECT_EQ(store.table_index(Table::volumes), 2u);
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  // No row is left to derive it from; a blocking query must still not see the index go back.
  EXPECT_EQ(again.table_index(Table::volumes), 2u);
  EXPECT_EQ(again.index(), 2u);
}

TEST_F(StateStoreTest, CorruptRowFailsTheLoadByName) {
  backend.snapshot.rows[Table::volumes]["bad"] = "{not json";
  StateStore again{io.get_executor(), backend};
  auto st = again.load();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("volumes row \"bad\""), std::string::npos) << st.error();
  EXPECT_FALSE(again.ready());
}

TEST_F(StateStoreTest, EventsAreCappedOldestFirstInTheSameTransaction) {
  StateStore small{io.get_executor(), backend, StateOptions{.max_events = 3}};
  ASSERT_TRUE(small.load());
  for (int i = 0; i < 5; ++i) {
    Batch b;
    b.add_event({.topic = "Test", .type = "E" + std::to_string(i)});
    ASSERT_TRUE(small.commit(std::move(b)));
  }
  ASSERT_EQ(small.events().size(), 3u);
  EXPECT_EQ(small.events().front().type, "E2");
  EXPECT_EQ(backend.snapshot.rows[Table::events].size(), 3u);
  StateStore again{io.get_executor(), backend, StateOptions{.max_events = 3}};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.events().front().type, "E2");
  Batch b;
  b.add_event({.topic = "Test", .type = "E5"});
  ASSERT_TRUE(again.commit(std::move(b)));  // trimming after a reload finds the stored keys
  EXPECT_EQ(backend.snapshot.rows[Table::events].size(), 3u);
  EXPECT_EQ(again.events().front().type, "E3");
}

TEST_F(StateStoreTest, WaitReturnsAtOnceWhenTheTableIsAlreadyPast) {
  Batch b;
  b.put(fixtures::volume("v1"));
  commit(std::move(b));
  auto f = asio::co_spawn(io, store.wait_for_change(Table::volumes, 0, 10s), asio::use_future);
  io.run();
  EXPECT_EQ(f.get(), 1u);
}

TEST_F(StateStoreTest, WaitWakesOnACommitToItsTableOnly) {
  std::optional<std::uint64_t> woke;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { woke = co_await store.wait_for_change(Table::volumes, 0, 30s); },
      asio::detached);
  io.poll();
  EXPECT_EQ(store.waiter_count(), 1u);
  Batch other;
  other.put(fixtures::allocation("a1"));
  commit(std::move(other));
  io.poll();
  EXPECT_FALSE(woke);  // an allocation write does not wake a volume watcher
  Batch b;
  b.put(fixtures::volume("v1"));
  commit(std::move(b));
  io.poll();
  ASSERT_TRUE(woke);
  EXPECT_EQ(*woke, 2u);
  EXPECT_EQ(store.waiter_count(), 0u);
}

TEST_F(StateStoreTest, WaitTimesOutWithTheCurrentIndex) {
  auto t0 = std::chrono::steady_clock::now();
  auto f = asio::co_spawn(io, store.wait_for_change(Table::volumes, 0, 100ms), asio::use_future);
  io.run();
  EXPECT_EQ(f.get(), 0u);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 90ms);
}

TEST_F(StateStoreTest, ReleaseWakesEveryWaiterAndLaterWaitsReturnAtOnce) {
  int woke = 0;
  for (int i = 0; i < 3; ++i)
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await store.wait_for_change(Table::events, 0, 1h);
          ++woke;
        },
        asio::detached);
  io.poll();
  EXPECT_EQ(store.waiter_count(), 3u);
  store.release_waiters();
  io.poll();
  EXPECT_EQ(woke, 3);
  auto t0 = std::chrono::steady_clock::now();
  auto f = asio::co_spawn(io, store.wait_for_change(Table::events, 0, 1h), asio::use_future);
  io.restart();
  io.run();
  f.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(StateStoreTest, CancellingAWaiterThrowsAndUnregistersIt) {
  asio::cancellation_signal cancel;
  std::exception_ptr error;
  asio::co_spawn(io, store.wait_for_change(Table::volumes, 0, 1h),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, std::uint64_t) { error = e; }));
  io.poll();
  EXPECT_EQ(store.waiter_count(), 1u);
  cancel.emit(asio::cancellation_type::terminal);
  io.poll();
  EXPECT_TRUE(error);
  EXPECT_EQ(store.waiter_count(), 0u);
}

TEST_F(StateStoreTest, CommitBeforeLoadIsRefused) {
  FakeBackend fresh;
  StateStore unloaded{io.get_executor(), fresh};
  Batch b;
  b.put(fixtures::volume("v1"));
  EXPECT_FALSE(unloaded.commit(std::move(b)));
  EXPECT_TRUE(fresh.transactions.empty());
}

// ---- group commit: memory at once, one backend write per wave, answers wait for durable() ----

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }

  std::uint64_t put_volume(const std::string& id) {
    Batch b;
    b.put(fixtures::volume(id));
    auto r = store.commit(std::move(b));
    EXPECT_TRUE(r) << (r ? "" : r.error());
    return r ? *r : 0;
  }

  void run() {  // everything ready, including a flush and its answer from the writer thread
    io.restart();
    io.poll();
    while (store.flushing()) {
      io.restart();
      io.run_one_for(std::chrono::seconds(5));
      io.restart();
      io.poll();
    }
  }

  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend, StateOptions{.group_commit = true}};
};

TEST_F(GroupCommitTest, CommitsOfOneWaveShareOneBackendWrite) {
  EXPECT_EQ(put_volume("v1"), 1u);
  EXPECT_EQ(put_volume("v2"), 2u);
  EXPECT_EQ(put_volume("v3"), 3u);
  // Memory has them at once (the next check-then-commit sees them); the disk does not yet.
  EXPECT_TRUE(store.volume("v3"));
  EXPECT_EQ(store.index(), 3u);
  EXPECT_TRUE(backend.transactions.empty());
  EXPECT_EQ(store.durable_index(), 0u);
  EXPECT_EQ(store.table_index(Table::volumes), 0u);  // watchers see only what is durable
  run();
  ASSERT_EQ(backend.groups, std::vector<std::size_t>{3});
  ASSERT_EQ(backend.transactions.size(), 3u);
  EXPECT_EQ(backend.transactions[2].index, 3u);
  EXPECT_EQ(store.durable_index(), 3u);
  EXPECT_EQ(store.table_index(Table::volumes), 3u);
}

// An answer built while memory runs ahead of the disk shows commits whose table index has not
// moved; the index handed out with it must still be past them, or a client echoing it back is
// told "nothing new" (the agent then sleeps a second before asking again).
TEST_F(GroupCommitTest, AnswerIndexCoversCommitsNotYetFlushed) {
  put_volume("v1");
  run();
  EXPECT_EQ(store.answer_index(Table::volumes), 1u);
  Batch b;
  b.put(fixtures::allocation("a1"));
  ASSERT_TRUE(store.commit(std::move(b)));
  EXPECT_EQ(store.table_index(Table::allocations), 0u);
  EXPECT_EQ(store.answer_index(Table::allocations), 2u);
  EXPECT_EQ(store.answer_index(Table::volumes), 2u);  // memory is past volumes' index too
  run();
  EXPECT_EQ(store.answer_index(Table::allocations), 2u);
  // Settled, the volumes' own index is 1 again, but 2 was handed out: an index never goes back.
  EXPECT_EQ(store.table_index(Table::volumes), 1u);
  EXPECT_EQ(store.answer_index(Table::volumes), 2u);
  EXPECT_EQ(store.answer_index(Table::acl_policies), 0u);  // never answered while ahead: its own
  put_volume("v2");
  run();
  EXPECT_EQ(store.answer_index(Table::volumes), 3u);  // the next change is past what was answered
}

TEST_F(GroupCommitTest, DurableReturnsOnlyOnceTheFlushWrote) {
  auto index = put_volume("v1");
  std::optional<domain::Status> result;
  bool written_when_woken = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        result = co_await store.durable(index);
        written_when_woken = !backend.transactions.empty();
      },
      asio::detached);
  run();
  ASSERT_TRUE(result);
  EXPECT_TRUE(*result);
  EXPECT_TRUE(written_when_woken);
  // Already durable: at once, without a flush.
  auto f = asio::co_spawn(io, store.durable(index), asio::use_future);
  run();
  EXPECT_TRUE(f.get());
}

TEST_F(GroupCommitTest, WatchersWakeWhenTheChangeIsDurable) {
  std::optional<std::uint64_t> woke;
  std::size_t written = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        woke = co_await store.wait_for_change(Table::volumes, 0, 30s);
        written = backend.transactions.size();
      },
      asio::detached);
  run();
  put_volume("v1");
  run();
  ASSERT_TRUE(woke);
  EXPECT_EQ(*woke, 1u);
  EXPECT_EQ(written, 1u);
}

// The flush runs on the store's writer thread: a slow disk does not stop the executor. Reads are
// served and commits made meanwhile ride the next flush; nothing counts as durable early.
TEST_F(GroupCommitTest, ASlowFlushDoesNotStopTheExecutor) {
  backend.group_delay = std::chrono::milliseconds(500);
  const auto first = put_volume("v1");
  io.restart();
  io.poll();  // the flush is handed to the writer, which now sleeps in the "disk"
  ASSERT_TRUE(store.flushing());
  bool timer_fired = false;
  asio::steady_timer timer(io, std::chrono::milliseconds(10));
  timer.async_wait([&](boost::system::error_code) { timer_fired = true; });
  io.restart();
  io.run_one_for(std::chrono::seconds(5));  // the timer, long before the flush's answer
  EXPECT_TRUE(timer_fired);
  EXPECT_TRUE(store.flushing()) << "the executor waited for the disk";
  EXPECT_TRUE(store.volume("v1"));          // memory serves reads at once...
  EXPECT_LT(store.durable_index(), first);  // ...and is not durable yet
  const auto second = put_volume("v2");     // commits go on
  backend.group_delay = std::chrono::milliseconds(0);
  run();
  EXPECT_EQ(store.durable_index(), second);
  EXPECT_EQ(backend.groups, (std::vector<std::size_t>{1, 1}));  // v2 rode the next flush
}

// A degraded leader (etcd without quorum): a read waiting for a flush that etcd cannot answer
// is released the moment the store turns read-only, and later reads do not wait at all; a
// write's answer still waits for the flush's own outcome.
TEST_F(GroupCommitTest, ReadsWaitingForAFlushAreAnsweredAtOnceWhenTheStoreTurnsReadOnly) {
  backend.group_delay = std::chrono::milliseconds(400);
  put_volume("v1");
  io.restart();
  io.poll();  // the flush is with the writer thread, which sleeps in the "disk"
  ASSERT_TRUE(store.flushing());
  std::optional<domain::Status> read, write;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { read = co_await store.readable_since(store.failed_flushes()); },
      asio::detached);
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { write = co_await store.durable_since(store.failed_flushes()); },
      asio::detached);
  io.restart();
  io.poll();
  EXPECT_FALSE(read) << "not read-only yet: a read waits for what it shows to be durable";
  store.set_read_only("etcd has no quorum");
  io.restart();
  io.poll();
  ASSERT_TRUE(read) << "the read still waits for the flush";
  EXPECT_TRUE(*read);
  EXPECT_TRUE(store.flushing());
  EXPECT_FALSE(write) << "a write's answer waits for its flush";
  // While read-only, a read does not wait even when memory runs ahead of the disk.
  auto again = asio::co_spawn(io, store.readable_since(store.failed_flushes()), asio::use_future);
  io.restart();
  io.poll();
  ASSERT_EQ(again.wait_for(0s), std::future_status::ready);
  EXPECT_TRUE(again.get());
  backend.group_delay = std::chrono::milliseconds(0);
  run();
  ASSERT_TRUE(write);
  EXPECT_TRUE(*write);
}

// An unconfirmed leader (its lease past the deadline, etcd electing its own raft leader, say):
// reads waiting for a flush are released and later ones do not wait, but commits are not refused
// (they are held upstream and go on when etcd answers); cleared, reads wait for durability again.
TEST_F(GroupCommitTest, ReadsFromMemoryReleaseWaitingReadsAndStillTakeCommits) {
  backend.group_delay = std::chrono::milliseconds(400);
  put_volume("v1");
  io.restart();
  io.poll();
  ASSERT_TRUE(store.flushing());
  std::optional<domain::Status> read;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { read = co_await store.readable_since(store.failed_flushes()); },
      asio::detached);
  io.restart();
  io.poll();
  EXPECT_FALSE(read);
  store.set_reads_from_memory(true);
  io.restart();
  io.poll();
  ASSERT_TRUE(read) << "the read still waits for the flush";
  EXPECT_TRUE(*read);
  EXPECT_FALSE(store.read_only());
  const auto second = put_volume("v2");  // a commit is taken, not refused
  EXPECT_TRUE(store.volume("v2"));
  store.set_reads_from_memory(false);
  auto waits = asio::co_spawn(io, store.readable_since(store.failed_flushes()), asio::use_future);
  io.restart();
  io.poll();
  EXPECT_NE(waits.wait_for(0s), std::future_status::ready) << "cleared: a read waits for durability again";
  backend.group_delay = std::chrono::milliseconds(0);
  run();
  EXPECT_EQ(store.durable_index(), second);
  ASSERT_EQ(waits.wait_for(0s), std::future_status::ready);
  EXPECT_TRUE(waits.get());
}

// A leader resuming after a quorum loss reloads from etcd: the backend's read runs on the writer
// thread, so the executor goes on serving reads from memory (a large state takes seconds).
TEST_F(GroupCommitTest, AReloadInTheBackgroundLeavesTheExecutorServingAndThenInstallsTheBackendsState) {
  put_volume("v1");
  put_volume("v2");
  run();
  const auto before = store.index();
  backend.snapshot.rows[Table::volumes].erase("v2");  // e.g. a write in doubt that never committed
  backend.load_delay = std::chrono::milliseconds(400);
  store.set_read_only("resuming");
  std::optional<domain::Status> reloaded;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { reloaded = co_await store.reload_in_background(); }, asio::detached);
  bool timer_fired = false;
  asio::steady_timer timer(io, std::chrono::milliseconds(10));
  timer.async_wait([&](boost::system::error_code) { timer_fired = true; });
  io.restart();
  io.run_one_for(std::chrono::seconds(5));
  io.restart();
  io.run_one_for(std::chrono::seconds(5));
  EXPECT_TRUE(timer_fired);
  EXPECT_FALSE(reloaded) << "the executor waited for the backend's read";
  EXPECT_TRUE(store.volume("v2"));  // memory serves until the read is in
  io.restart();
  io.run_for(std::chrono::seconds(2));
  ASSERT_TRUE(reloaded);
  EXPECT_TRUE(*reloaded) << reloaded->error();
  EXPECT_TRUE(store.volume("v1"));
  EXPECT_FALSE(store.volume("v2"));
  EXPECT_GT(store.index(), before) << "indexes move on, never back";
  EXPECT_GT(store.table_index(Table::volumes), before);
}

TEST_F(GroupCommitTest, AFailedFlushReloadsWhatIsDurableAndFailsItsWaiters) {
  put_volume("v1");
  run();
  backend.fail_apply = true;
  Batch b;
  b.erase_volume("v1");
  b.put(fixtures::volume("v2"));
  b.add_event({.topic = "Volume", .type = "Deregistered", .key = "v1"});
  auto index = store.commit(std::move(b));
  ASSERT_TRUE(index);
  EXPECT_FALSE(store.volume("v1"));  // memory ran ahead...
  const auto incarnation = store.incarnation();
  std::optional<domain::Status> result;
  std::optional<std::uint64_t> woke;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { result = co_await store.durable(*index); }, asio::detached);
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { woke = co_await store.wait_for_change(Table::volumes, 1, 30s); },
      asio::detached);
  run();
  // ...and is back to the disk: nobody was told the write happened.
  ASSERT_TRUE(result);
  ASSERT_FALSE(*result);
  EXPECT_NE(result->error().find("disk full"), std::string::npos);
  EXPECT_TRUE(store.volume("v1"));
  EXPECT_FALSE(store.volume("v2"));
  EXPECT_TRUE(store.events().empty());
  // Indexes move on, never back, so watchers re-read and no answer cached by index is reused.
  EXPECT_GT(store.index(), *index);
  EXPECT_EQ(store.table_index(Table::volumes), store.index());
  // Objects went back to older versions: an agent's modify indexes mean nothing here any more.
  EXPECT_NE(store.incarnation(), incarnation);
  ASSERT_TRUE(woke);
  // A lost index stays lost for late waiters too, and an answer begun before the failure is not
  // given as if its writes had happened.
  auto late = asio::co_spawn(io, store.durable(*index), asio::use_future);
  auto answer = asio::co_spawn(io, store.durable_since(0), asio::use_future);
  run();
  EXPECT_FALSE(late.get());
  EXPECT_FALSE(answer.get());
  EXPECT_EQ(store.failed_flushes(), 1u);
  // Writes work again once the disk does.
  backend.fail_apply = false;
  auto next = put_volume("v3");
  EXPECT_GT(next, store.durable_index());
  run();
  EXPECT_EQ(store.durable_index(), next);
  EXPECT_TRUE(backend.snapshot.rows[Table::volumes].count("v1"));
  EXPECT_TRUE(backend.snapshot.rows[Table::volumes].count("v3"));
  EXPECT_FALSE(backend.snapshot.rows[Table::volumes].count("v2"));
}

TEST_F(GroupCommitTest, WhenReloadingFailsTooWritesAndDurabilityAreRefused) {
  put_volume("v1");
  run();
  backend.fail_apply = true;
  backend.fail_load = true;
  auto index = put_volume("v2");
  run();
  Batch b;
  b.put(fixtures::volume("v3"));
  auto refused = store.commit(std::move(b));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("not writable"), std::string::npos);
  auto f = asio::co_spawn(io, store.durable(index), asio::use_future);
  run();
  auto st = f.get();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("disk full"), std::string::npos);
}

TEST_F(GroupCommitTest, CancellingADurableWaitThrowsAndUnregistersIt) {
  asio::cancellation_signal cancel;
  std::exception_ptr error;
  bool done = false;
  // Index 1 is not committed yet, so the wait suspends until the flush that makes it durable.
  asio::co_spawn(io, store.durable(1),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, domain::Status) {
                   error = e;
                   done = true;
                 }));
  run();
  ASSERT_FALSE(done);
  cancel.emit(asio::cancellation_type::terminal);
  run();
  EXPECT_TRUE(done);
  EXPECT_TRUE(error);
  put_volume("v1");  // the flush finds no stale waiter
  run();
  EXPECT_EQ(store.durable_index(), 1u);
}

TEST_F(GroupCommitTest, PendingCommitsAreWrittenWhenTheStoreIsDestroyed) {
  FakeBackend disk;
  {
    StateStore scoped{io.get_executor(), disk, StateOptions{.group_commit = true}};
    ASSERT_TRUE(scoped.load());
    Batch b;
    b.put(fixtures::volume("v1"));
    ASSERT_TRUE(scoped.commit(std::move(b)));
  }
  EXPECT_EQ(disk.transactions.size(), 1u);
  run();  // the posted flush finds the store gone and does nothing
}

}  // namespace mooring::controlplane
