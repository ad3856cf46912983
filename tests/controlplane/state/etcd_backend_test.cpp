// The etcd backend against a real etcd (Debian's etcd-server, started per test): round trips,
// group commits split by etcd's limits, chunked transactions and snapshots, compaction of the
// log, a second writer refused, etcd killed mid-way and restarted, torn chunks named at load.
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/etcd/snapshot_policy.hpp"

#include <boost/asio/io_context.hpp>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "etcd/rpc.grpc.pb.h"
#include "services/controlplane/state/state_store.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {
namespace {

using namespace std::chrono_literals;

TEST(EtcdUrl, ParsesEndpointsAndPrefix) {
  auto o = parse_etcd_url("etcd://10.0.0.1:2379,10.0.0.2:2379/prod/mooring/");
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->endpoints, (std::vector<std::string>{"10.0.0.1:2379", "10.0.0.2:2379"}));
  EXPECT_EQ(o->prefix, "/prod/mooring");
  o = parse_etcd_url("etcd://etcd:2379");
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->prefix, "/mooring");
}

TEST(EtcdUrl, BadUrlsNameThePart) {
  EXPECT_NE(parse_etcd_url("sqlite:///x").error().find("expected etcd://"), std::string::npos);
  EXPECT_NE(parse_etcd_url("etcd://host/p").error().find("endpoint \"host\" is not host:port"), std::string::npos);
  EXPECT_NE(parse_etcd_url("etcd://a:1,:2/p").error().find("endpoint \":2\""), std::string::npos);
  EXPECT_NE(parse_etcd_url("etcd:///p").error().find("no endpoint"), std::string::npos);
}

class EtcdBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
    etcd = std::make_unique<test::EtcdProcess>(dir.path() / "etcd");
    etcd->start();
  }
  EtcdOptions options() const {
    EtcdOptions o;
    o.endpoints = {etcd->endpoint()};
    o.prefix = "/test";
    o.timeout = 2s;
    return o;
  }
  std::unique_ptr<EtcdBackend> open(EtcdOptions o) {
    auto b = EtcdBackend::open(std::move(o));
    EXPECT_TRUE(b) << b.error();
    return b ? std::move(*b) : nullptr;
  }
  std::unique_ptr<EtcdBackend> open() { return open(options()); }
  // Raw etcd access, to look at what the backend wrote and to tamper with it.
  std::unique_ptr<::etcdserverpb::KV::Stub> raw() const {
    return ::etcdserverpb::KV::NewStub(grpc::CreateChannel(etcd->endpoint(), grpc::InsecureChannelCredentials()));
  }
  void put(const std::string& key, const std::string& value, int64_t* revision = nullptr) const {
    ::etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    ::etcdserverpb::PutResponse res;
    grpc::ClientContext ctx;
    ASSERT_TRUE(raw()->Put(&ctx, req, &res).ok());
    if (revision) *revision = res.header().revision();
  }
  int64_t count(const std::string& prefix) const {
    ::etcdserverpb::RangeRequest req;
    req.set_key(prefix);
    std::string end = prefix;
    ++end.back();
    req.set_range_end(end);
    req.set_count_only(true);
    ::etcdserverpb::RangeResponse res;
    grpc::ClientContext ctx;
    EXPECT_TRUE(raw()->Range(&ctx, req, &res).ok());
    return res.count();
  }
  static Transaction tx(std::uint64_t index, std::string key, std::optional<std::string> value,
                        Table table = Table::volumes) {
    return Transaction{index, {{table, std::move(key), std::move(value)}}, {table}};
  }

  test::TempDir dir{"mooring-etcd-backend"};
  std::unique_ptr<test::EtcdProcess> etcd;
};

TEST_F(EtcdBackendTest, RoundTripsRowsDeletesAndTableIndexes) {
  {
    auto b = open();
    auto empty = b->load();
    ASSERT_TRUE(empty) << empty.error();
    EXPECT_EQ(empty->index, 0u);
    ASSERT_TRUE(b->apply(Transaction{1, {{Table::volumes, "v1", R"({"ID":"v1"})"}, {Table::plugins, "p", "{}"}},
                                     {Table::volumes, Table::plugins}}));
    ASSERT_TRUE(b->apply(Transaction{2, {{Table::plugins, "p", std::nullopt}, {Table::events, "e1", "{}"}},
                                     {Table::plugins, Table::events}}));
  }
  auto b = open();
  auto snap = b->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 2u);
  EXPECT_EQ(snap->rows[Table::volumes]["v1"], R"({"ID":"v1"})");
  EXPECT_TRUE(snap->rows[Table::plugins].empty());
  EXPECT_EQ(snap->rows[Table::events].size(), 1u);
  EXPECT_EQ(snap->table_index[Table::volumes], 1u);
  EXPECT_EQ(snap->table_index[Table::plugins], 2u);  // a deletion moves its table's index too
}

TEST_F(EtcdBackendTest, AGroupLargerThanEtcdsLimitsIsSplitAndEveryTransactionLands) {
  auto o = options();
  o.max_request_bytes = 8 * 1024;  // a few entries per Txn
  auto b = open(o);
  ASSERT_TRUE(b->load());
  std::vector<Transaction> group;
  for (std::uint64_t i = 1; i <= 300; ++i) group.push_back(tx(i, "v" + std::to_string(i), std::string(1000, 'x')));
  ASSERT_TRUE(b->apply_group(group));
  // Packed a few to an entry (8 KiB each), so more than one Txn (each at most 8 KiB) carried them.
  EXPECT_GE(count("/test/log/"), 300 / 8);
  EXPECT_LT(count("/test/log/"), 300);
  auto again = open(o);
  auto snap = again->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 300u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 300u);
}

// etcd's 128 operations per Txn once capped a Txn at 127 small transactions (one key each); a
// group commit of thousands (a GC storm) took that many Txns, each a Raft round. Packed, a group
// of 1000 small ones is a few entries, loads in order, and a chunked one in the middle of a group
// splits it where it stands.
TEST_F(EtcdBackendTest, SmallTransactionsOfAGroupArePackedIntoFewEntriesAndLoadInOrder) {
  auto o = options();
  o.snapshot_every = 5000;  // the log itself is looked at, not a snapshot of it
  {
    auto b = open(o);
    ASSERT_TRUE(b->load());
    std::vector<Transaction> group;
    for (std::uint64_t i = 1; i <= 1000; ++i) group.push_back(tx(i, "v" + std::to_string(i % 700), "{\"n\":" + std::to_string(i) + "}"));
    Transaction big{1001, {}, {Table::volumes}};
    for (int i = 0; i < 2000; ++i) big.mutations.push_back({Table::volumes, "big" + std::to_string(i), std::string(1000, 'b')});
    group.push_back(big);  // ~2 MiB: chunked
    for (std::uint64_t i = 1002; i <= 1010; ++i) group.push_back(tx(i, "v1", "{\"n\":" + std::to_string(i) + "}"));
    ASSERT_TRUE(b->apply_group(group));
    EXPECT_EQ(b->log_entries(), 1010u);
  }
  EXPECT_EQ(count("/test/log/"), 3);  // the 1000, the chunked one, the 9 after it
  auto snap = open(o)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 1010u);
  ASSERT_EQ(snap->rows[Table::volumes].size(), 700u + 2000u);
  EXPECT_EQ(snap->rows[Table::volumes]["v1"], "{\"n\":1010}");  // the last write of each key wins
  EXPECT_EQ(snap->rows[Table::volumes]["v0"], "{\"n\":700}");
  EXPECT_EQ(snap->rows[Table::volumes]["v699"], "{\"n\":699}");
  EXPECT_EQ(snap->table_index[Table::volumes], 1010u);
}

TEST_F(EtcdBackendTest, ATransactionLargerThanARequestIsChunkedAndLoadsWhole) {
  auto b = open();
  ASSERT_TRUE(b->load());
  Transaction big{1, {}, {Table::volumes}};
  for (int i = 0; i < 3000; ++i) big.mutations.push_back({Table::volumes, "v" + std::to_string(i), std::string(1000, 'a' + i % 26)});
  ASSERT_TRUE(b->apply(big));  // ~3 MiB: over etcd's 1.5 MiB request limit
  EXPECT_GE(count("/test/stage/log-"), 3);
  auto snap = open()->load();
  ASSERT_TRUE(snap) << snap.error();
  ASSERT_EQ(snap->rows[Table::volumes].size(), 3000u);
  EXPECT_EQ(snap->rows[Table::volumes]["v27"], std::string(1000, 'b'));
}

// A state the size of 100,000 volumes: more log entries of nearly a request each, and then more
// snapshot chunks, than one answer may carry (gRPC's receive limit, 64 MiB). The load reads them
// in pages; it once asked for 512 at a time and the state did not load at all.
TEST_F(EtcdBackendTest, AStateLargerThanOneAnswerLoadsInPagesFromTheLogAndFromASnapshot) {
  constexpr int kEntries = 80;  // ~0.9 MiB each: 70 MiB in all
  {
    auto b = open();
    ASSERT_TRUE(b->load());
    for (int i = 1; i <= kEntries; ++i)
      ASSERT_TRUE(b->apply(tx(static_cast<std::uint64_t>(i), "v" + std::to_string(i), std::string(900 * 1024, 'a' + i % 26))));
  }
  EXPECT_EQ(count("/test/stage/log-"), 0);  // every entry inline, each under a request
  {
    auto b = open();
    auto snap = b->load();
    ASSERT_TRUE(snap) << snap.error();
    EXPECT_EQ(snap->index, static_cast<std::uint64_t>(kEntries));
    ASSERT_EQ(snap->rows[Table::volumes].size(), static_cast<std::size_t>(kEntries));
    EXPECT_EQ(snap->rows[Table::volumes]["v27"], std::string(900 * 1024, 'b'));
    ASSERT_TRUE(b->snapshot_now());
  }
  EXPECT_GE(count("/test/stage/snap-"), 65);  // more than 64 MiB of chunks
  auto snap = open()->load();
  ASSERT_TRUE(snap) << snap.error();
  ASSERT_EQ(snap->rows[Table::volumes].size(), static_cast<std::size_t>(kEntries));
  EXPECT_EQ(snap->rows[Table::volumes]["v1"], std::string(900 * 1024, 'b'));
}

TEST_F(EtcdBackendTest, TornChunksFailTheLoadNamingThem) {
  auto b = open();
  ASSERT_TRUE(b->load());
  Transaction big{1, {}, {Table::volumes}};
  for (int i = 0; i < 2000; ++i) big.mutations.push_back({Table::volumes, "v" + std::to_string(i), std::string(1000, 'z')});
  ASSERT_TRUE(b->apply(big));
  ::etcdserverpb::DeleteRangeRequest del;
  del.set_key("/test/stage/log-");
  del.set_range_end("/test/stage/log.");  // every chunk of it
  ::etcdserverpb::DeleteRangeResponse res;
  grpc::ClientContext ctx;
  ASSERT_TRUE(raw()->DeleteRange(&ctx, del, &res).ok());
  auto snap = open()->load();
  ASSERT_FALSE(snap);
  EXPECT_NE(snap.error().find("stage/log-00000000000000000001"), std::string::npos) << snap.error();
  EXPECT_NE(snap.error().find("chunks present"), std::string::npos) << snap.error();
}

TEST_F(EtcdBackendTest, ASnapshotReplacesTheLogItCoversAndLoadsTheSame) {
  auto o = options();
  o.snapshot_every = 10;
  auto b = open(o);
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= 25; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i % 7), std::to_string(i))));
  ASSERT_TRUE(b->apply(tx(26, "v3", std::nullopt)));
  ASSERT_TRUE(b->wait_snapshot());
  // Snapshots in the background: at 10, then at the first commit after it is done once 10 more
  // are due (at 20 on a quiet machine: fewer than 10 entries left). A loaded machine saw the first
  // one still running at 26 (16 left); at least that one replaced the log it covers.
  EXPECT_LE(b->log_entries(), 16u);
  EXPECT_EQ(count("/test/log/"), static_cast<int64_t>(b->log_entries()));
  EXPECT_EQ(count("/test/snap"), 1);
  auto snap = open(o)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 26u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 6u);
  EXPECT_EQ(snap->rows[Table::volumes]["v4"], "25");
  EXPECT_EQ(snap->rows[Table::volumes].count("v3"), 0u);
  // Twice at the same index: the older copy's chunks go.
  auto same = open(o);
  ASSERT_TRUE(same->load());
  ASSERT_TRUE(same->snapshot_now());
  ASSERT_TRUE(same->snapshot_now());
  EXPECT_EQ(count("/test/stage/snap-"), 1);
  EXPECT_EQ(count("/test/log/"), 0);
  ASSERT_TRUE(open(o)->load());
}

// Issue 22's second gap: a snapshot of a large state (~36 MiB here, 70 at 100,000 volumes) was
// written on the writer thread, so the commit that made it due, and every commit queued behind
// it, waited for all its puts. Now it is staged from the backend's own thread: commits go on while
// it stages (each chunk is slowed here, so the staging certainly outlasts many commits).
TEST_F(EtcdBackendTest, ASnapshotIsStagedInTheBackgroundWhileCommitsGoOn) {
  constexpr std::uint64_t kBig = 36;  // rows of ~0.9 MiB: one snapshot chunk each
  std::atomic<int> chunks = 0;
  std::atomic<bool> staged = false;
  auto o = options();
  o.snapshot_every = kBig + 1;
  o.snapshot_chunk_bytes = o.max_request_bytes;  // 1 MiB chunks: ~32
  o.snapshot_step = [&](EtcdOptions::SnapshotStep step) {
    if (step == EtcdOptions::SnapshotStep::chunk_staged) {
      ++chunks;
      std::this_thread::sleep_for(30ms);
    }
    if (step == EtcdOptions::SnapshotStep::staged) staged = true;
    return true;
  };
  auto b = open(o);
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= kBig; ++i)
    ASSERT_TRUE(b->apply(tx(i, "big" + std::to_string(i), std::string(900 * 1024, 'a' + i % 26))));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(b->apply(tx(kBig + 1, "small", "0")));  // the snapshot is due now
  const auto due = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(b->snapshot_in_flight());
  std::uint64_t index = kBig + 1;
  int during = 0;  // commits made while its chunks were being staged
  auto slowest = std::chrono::steady_clock::duration::zero();
  while (!staged) {
    const auto t = std::chrono::steady_clock::now();
    const bool staging = chunks > 0;
    ++index;
    ASSERT_TRUE(b->apply(tx(index, "small" + std::to_string(index % 5), std::to_string(index))));
    if (staging && !staged) {
      ++during;
      slowest = std::max(slowest, std::chrono::steady_clock::now() - t);
    }
  }
  const auto staging_took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(chunks.load(), 30);  // ~32 MiB in 1 MiB chunks
  EXPECT_GE(during, 5) << "commits waited for the snapshot";
  EXPECT_LT(due, staging_took / 4) << "the commit that made the snapshot due waited for it";
  EXPECT_LT(slowest, staging_took / 4);
  ASSERT_TRUE(b->wait_snapshot());
  EXPECT_FALSE(b->snapshot_in_flight());
  EXPECT_EQ(count("/test/snap"), 1);
  // The log kept is what was committed after the snapshot's index, every entry of it.
  EXPECT_EQ(count("/test/log/"), static_cast<int64_t>(index - (kBig + 1)));
  EXPECT_EQ(b->log_entries(), index - (kBig + 1));
  auto snap = open()->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, index);
  EXPECT_EQ(snap->rows[Table::volumes].size(), kBig + 1 + std::min<std::uint64_t>(5, index - kBig - 1));
  EXPECT_EQ(snap->rows[Table::volumes]["big27"], std::string(900 * 1024, 'b'));
  EXPECT_EQ(snap->rows[Table::volumes]["small" + std::to_string(index % 5)], std::to_string(index));
}

// A crash at each point of a background snapshot (the process gone: the hook stops it there)
// leaves a state that loads whole; the chunks of one that never committed are removed by the next.
TEST_F(EtcdBackendTest, ACrashAtEachPointOfASnapshotLoadsWholeAndItsOrphanChunksGoLater) {
  using Step = EtcdOptions::SnapshotStep;
  int n = 0;
  for (Step crash : {Step::chunk_staged, Step::staged, Step::committed}) {
    SCOPED_TRACE(testing::Message() << "crash after step " << static_cast<int>(crash));
    const std::string prefix = "/crash" + std::to_string(n++);
    auto o = options();
    o.prefix = prefix;
    o.snapshot_every = 10;
    o.max_request_bytes = 4096;  // several chunks
    bool crashed = false;
    o.snapshot_step = [&](Step step) {
      if (step != crash || crashed) return true;
      crashed = true;
      return false;
    };
    auto b = open(o);
    ASSERT_TRUE(b->load());
    for (std::uint64_t i = 1; i <= 10; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), std::string(1000, 'x'))));
    auto st = b->wait_snapshot();
    EXPECT_EQ(static_cast<bool>(st), crash == Step::committed) << (st ? "" : st.error());
    EXPECT_EQ(count(prefix + "/snap"), crash == Step::committed ? 1 : 0);
    EXPECT_GT(count(prefix + "/stage/snap-"), 0);  // staged (some or all), or the committed one
    EXPECT_EQ(count(prefix + "/log/"), crash == Step::committed ? 0 : 10);
    {
      auto other = open(o);
      auto snap = other->load();
      ASSERT_TRUE(snap) << snap.error();
      EXPECT_EQ(snap->index, 10u);
      EXPECT_EQ(snap->rows[Table::volumes].size(), 10u);
    }
    // The next snapshot (10 commits later) replaces the orphans with its own chunks only.
    for (std::uint64_t i = 11; i <= 20; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), std::string(1000, 'y'))));
    ASSERT_TRUE(b->wait_snapshot());
    ASSERT_TRUE(b->snapshot_now());  // at 20: every older chunk goes, orphans included
    auto snap = open(o)->load();
    ASSERT_TRUE(snap) << snap.error();
    EXPECT_EQ(snap->index, 20u);
    EXPECT_EQ(snap->rows[Table::volumes]["v15"], std::string(1000, 'y'));
    EXPECT_EQ(count(prefix + "/log/"), 0);
    ::etcdserverpb::RangeRequest req;  // every chunk left is the one snap names
    req.set_key(prefix + "/stage/snap-");
    req.set_range_end(prefix + "/stage/snap.");
    req.set_keys_only(true);
    ::etcdserverpb::RangeResponse res;
    grpc::ClientContext ctx;
    ASSERT_TRUE(raw()->Range(&ctx, req, &res).ok());
    std::set<std::string> stages;
    for (const auto& kv : res.kvs()) stages.insert(kv.key().substr(0, kv.key().rfind('/')));
    EXPECT_EQ(stages.size(), 1u);
  }
}

// The snapshot's Txn is fenced by the leader key (not by head): a leader that lost the key while
// its snapshot was staged commits nothing of it, learns it on the writer's thread, and the state
// loads whole.
TEST_F(EtcdBackendTest, ASnapshotTxnOfALeaderThatLostItsKeyIsRefusedAndChangesNothing) {
  int64_t created = 0;
  put("/test/leader", "me", &created);
  auto o = options();
  o.snapshot_every = 10;
  o.snapshot_step = [&](EtcdOptions::SnapshotStep step) {
    if (step == EtcdOptions::SnapshotStep::staged) put("/test/leader", "another");
    return true;
  };
  auto b = open(o);
  std::string lost;
  b->require_fence([&](const std::string& why) { lost = why; });
  b->set_fence(LeaderFence{.key = "/test/leader", .create_revision = created, .value = "me", .lease_valid = {}});
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= 10; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), "x")));
  auto st = b->wait_snapshot();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("no longer the leader"), std::string::npos) << st.error();
  EXPECT_NE(lost.find("another control plane holds the leader key"), std::string::npos) << lost;
  EXPECT_EQ(count("/test/snap"), 0);
  EXPECT_EQ(count("/test/log/"), 10);
  EXPECT_FALSE(b->apply(tx(11, "v11", "x")));  // fenced until a reload
  auto snap = open()->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 10u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 10u);
}

// etcd gone while the snapshot's Txn is sent: its outcome is unknown to the backend. The writer
// goes on (head is untouched by a snapshot), and the next snapshot first reads `snap` to learn
// which revision to compare: here the Txn never landed, so it compares the previous one's.
TEST_F(EtcdBackendTest, ASnapshotTxnOfUnknownOutcomeIsLearntByTheNextSnapshot) {
  auto o = options();
  o.snapshot_every = 10;
  bool killed = false;
  o.snapshot_step = [&](EtcdOptions::SnapshotStep step) {
    if (step == EtcdOptions::SnapshotStep::staged && !killed) {
      killed = true;
      etcd->kill();
    }
    return true;
  };
  auto b = open(o);
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= 10; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), "x")));
  auto st = b->wait_snapshot();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("commit"), std::string::npos) << st.error();
  etcd->start();
  for (std::uint64_t i = 11; i <= 20; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), "y")));
  ASSERT_TRUE(b->wait_snapshot());
  EXPECT_EQ(count("/test/snap"), 1);
  auto snap = open()->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 20u);
  EXPECT_EQ(snap->rows[Table::volumes]["v15"], "y");
  EXPECT_EQ(snap->rows[Table::volumes].size(), 20u);
}

// ---- when a snapshot is due (snapshot_policy.hpp) ----

TEST(SnapshotPolicy, EveryNUntilTheFirstThenAShareOfItsBytesOrTheCap) {
  const SnapshotPolicy p{.every = 10, .log_fraction = 0.25, .max_entries = 0};
  EXPECT_EQ(snapshot_cap(p), 200u);
  EXPECT_FALSE(snapshot_due(p, {.entries = 9, .log_bytes = 0, .snapshot_bytes = 0}));
  EXPECT_TRUE(snapshot_due(p, {.entries = 10, .log_bytes = 0, .snapshot_bytes = 0}));  // no snapshot yet
  EXPECT_FALSE(snapshot_due(p, {.entries = 10, .log_bytes = 249, .snapshot_bytes = 1000}));
  EXPECT_TRUE(snapshot_due(p, {.entries = 10, .log_bytes = 250, .snapshot_bytes = 1000}));
  EXPECT_FALSE(snapshot_due(p, {.entries = 9, .log_bytes = 5000, .snapshot_bytes = 1000}));  // and at least `every`
  EXPECT_FALSE(snapshot_due(p, {.entries = 199, .log_bytes = 1, .snapshot_bytes = 1000}));
  EXPECT_TRUE(snapshot_due(p, {.entries = 200, .log_bytes = 1, .snapshot_bytes = 1000}));  // the cap
  EXPECT_TRUE(snapshot_due({.every = 10, .log_fraction = 0, .max_entries = 0}, {.entries = 10, .log_bytes = 0, .snapshot_bytes = 1000}));
  EXPECT_TRUE(snapshot_due({.every = 10, .log_fraction = 0.25, .max_entries = 15}, {.entries = 15, .log_bytes = 0, .snapshot_bytes = 1000}));
}

class EtcdSnapshotPolicyTest : public EtcdBackendTest {
 protected:
  static constexpr std::size_t kRows = 40, kRowBytes = 10 * 1024;  // a ~400 KiB state
  EtcdOptions policy_options() const {
    auto o = options();
    o.snapshot_every = 10;
    return o;
  }
  // A backend whose state of kRows rows is in a committed snapshot and whose log is empty: the
  // first snapshot comes every `snapshot_every` (10 big transactions here).
  std::unique_ptr<EtcdBackend> with_snapshot(EtcdOptions o) {
    auto b = open(std::move(o));
    EXPECT_TRUE(b->load());
    std::vector<Transaction> group;
    for (std::uint64_t i = 1; i <= 10; ++i) {
      Transaction t{i, {}, {Table::volumes}};
      for (std::size_t k = (i - 1) * kRows / 10; k < i * kRows / 10; ++k)
        t.mutations.push_back({Table::volumes, "v" + std::to_string(k), std::string(kRowBytes, 'a')});
      group.push_back(std::move(t));
    }
    EXPECT_TRUE(b->apply_group(group));
    EXPECT_TRUE(b->snapshot_in_flight());
    EXPECT_TRUE(b->wait_snapshot());
    EXPECT_EQ(b->log_entries(), 0u);
    EXPECT_EQ(b->log_bytes(), 0u);
    EXPECT_GT(b->snapshot_bytes(), kRows * kRowBytes);
    return b;
  }
  // The counters of `b` are what a load of etcd finds.
  void expect_counters_as_loaded(const EtcdBackend& b, EtcdOptions o) {
    auto again = open(std::move(o));
    ASSERT_TRUE(again->load());
    EXPECT_EQ(again->log_entries(), b.log_entries());
    EXPECT_EQ(again->log_bytes(), b.log_bytes());
    EXPECT_EQ(again->snapshot_bytes(), b.snapshot_bytes());
  }
};

// Issue 22: at 100,000 volumes a snapshot every 1,000 commits meant one staging nearly all the
// time. Many transactions whose log is small beside the state write no snapshot.
TEST_F(EtcdSnapshotPolicyTest, ASmallLogOverALargeStateDoesNotTriggerASnapshot) {
  auto b = with_snapshot(policy_options());
  for (std::uint64_t i = 11; i <= 60; ++i) {  // five times `snapshot_every`, ~60 bytes each
    ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i % kRows), std::to_string(i))));
    ASSERT_FALSE(b->snapshot_in_flight()) << "at index " << i;
  }
  EXPECT_EQ(b->log_entries(), 50u);
  EXPECT_LT(b->log_bytes(), b->snapshot_bytes() / 4);
  EXPECT_EQ(count("/test/log/"), 50);
  EXPECT_EQ(count("/test/snap"), 1);
}

// The log grows to a quarter of the snapshot's bytes: the commit that gets it there starts one,
// not the one before.
TEST_F(EtcdSnapshotPolicyTest, ALogOfAQuarterOfTheStateTriggersOne) {
  auto b = with_snapshot(policy_options());
  const std::uint64_t quarter = b->snapshot_bytes() / 4;
  const std::uint64_t first_snapshot = b->snapshot_bytes();
  std::uint64_t index = 10;
  std::uint64_t before = 0;
  while (!b->snapshot_in_flight()) {
    ASSERT_LT(index, 100u) << "no snapshot with a log of " << b->log_bytes() << " bytes";
    before = b->log_bytes();
    ++index;
    ASSERT_TRUE(b->apply(tx(index, "v" + std::to_string(index % kRows), std::string(3000, 'q'))));  // ~3 KiB each
  }
  EXPECT_LT(before, quarter);
  EXPECT_GE(b->log_bytes(), quarter);
  EXPECT_GT(index - 10, 10u);  // more than `snapshot_every`: the bytes decided
  ASSERT_TRUE(b->wait_snapshot());
  EXPECT_EQ(b->log_entries(), 0u);
  EXPECT_EQ(b->log_bytes(), 0u);
  EXPECT_EQ(count("/test/log/"), 0);
  EXPECT_LT(b->snapshot_bytes(), first_snapshot);  // rows overwritten by smaller ones: its own size now
  expect_counters_as_loaded(*b, policy_options());
}

// However small the transactions, the log a load replays is bounded: the cap starts one.
TEST_F(EtcdSnapshotPolicyTest, TheCapOnEntriesTriggersOne) {
  auto o = policy_options();
  o.snapshot_max_entries = 25;
  auto b = with_snapshot(o);
  for (std::uint64_t i = 11; i <= 34; ++i) {
    ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i % kRows), "x")));
    ASSERT_FALSE(b->snapshot_in_flight()) << "at index " << i;
  }
  ASSERT_TRUE(b->apply(tx(35, "v0", "x")));  // the 25th
  EXPECT_TRUE(b->snapshot_in_flight());
  EXPECT_LT(b->log_bytes(), b->snapshot_bytes() / 4);
  ASSERT_TRUE(b->wait_snapshot());
  EXPECT_EQ(b->log_entries(), 0u);
  EXPECT_EQ(count("/test/log/"), 0);
}

// The counters decide the next snapshot, so they must be right after a load (rebuilt from the
// entries it reads, packed and chunked ones included) and after a background snapshot committed
// at index N while the writer appended N+1...: those stay counted, entries and bytes.
TEST_F(EtcdSnapshotPolicyTest, CountersAreRightAfterAReloadAndAfterASnapshotThatCommitsBehindTheWriter) {
  std::atomic<bool> appended = false;
  auto o = policy_options();
  o.max_request_bytes = 16 * 1024;  // a 40 KiB transaction is chunked
  o.snapshot_step = [&](EtcdOptions::SnapshotStep step) {
    if (step == EtcdOptions::SnapshotStep::staged)
      while (!appended) std::this_thread::sleep_for(5ms);
    return true;
  };
  appended = true;  // the first snapshot (with_snapshot's) goes straight through
  auto b = with_snapshot(o);
  // A group packed into entries, a chunked transaction, single ones; then more than a quarter
  // of the state, so a snapshot starts at the last of them.
  std::vector<Transaction> group;
  for (std::uint64_t i = 11; i <= 30; ++i) group.push_back(tx(i, "v" + std::to_string(i % kRows), std::to_string(i)));
  ASSERT_TRUE(b->apply_group(group));
  ASSERT_TRUE(b->apply(tx(31, "chunky", std::string(40 * 1024, 'c'))));
  EXPECT_GE(count("/test/stage/log-"), 3);
  EXPECT_EQ(b->log_entries(), 21u);
  expect_counters_as_loaded(*b, o);
  appended = false;  // the next snapshot waits, staged, until the writer appended more
  std::uint64_t index = 31;
  while (!b->snapshot_in_flight()) {
    ASSERT_LT(index, 200u);
    ++index;
    ASSERT_TRUE(b->apply(tx(index, "v" + std::to_string(index % kRows), std::string(8000, 'r'))));
  }
  const std::uint64_t covered_bytes = b->log_bytes();
  for (std::uint64_t i = index + 1; i <= index + 5; ++i) ASSERT_TRUE(b->apply(tx(i, "after" + std::to_string(i), "x")));
  const std::uint64_t after_bytes = b->log_bytes() - covered_bytes;
  appended = true;
  ASSERT_TRUE(b->wait_snapshot());
  EXPECT_EQ(b->log_entries(), 5u);
  EXPECT_EQ(b->log_bytes(), after_bytes);
  EXPECT_EQ(count("/test/log/"), 5);
  expect_counters_as_loaded(*b, o);
}

TEST_F(EtcdBackendTest, ASecondWriterOnThePrefixIsRefusedAndWritesNothing) {
  auto a = open();
  auto b = open();
  ASSERT_TRUE(a->load());
  ASSERT_TRUE(b->load());
  ASSERT_TRUE(a->apply(tx(1, "v1", "a")));
  auto st = b->apply(tx(1, "v1", "b"));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("another writer"), std::string::npos) << st.error();
  EXPECT_FALSE(b->apply(tx(2, "v2", "b")));  // stays refused until it reloads
  ASSERT_TRUE(a->apply(tx(2, "v2", "a")));
  auto snap = open()->load();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->rows[Table::volumes]["v1"], "a");
  EXPECT_EQ(snap->rows[Table::volumes]["v2"], "a");
  // Reloaded, b sees a's writes and may write after them; a is the one refused now.
  auto seen = b->load();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->index, 2u);
  ASSERT_TRUE(b->apply(tx(3, "v3", "b")));
  EXPECT_FALSE(a->apply(tx(3, "v3", "a")));
}

TEST_F(EtcdBackendTest, EtcdDownIsAnErrorAndARestartedEtcdHasEveryCommittedWrite) {
  auto b = open();
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), "x")));
  etcd->kill();
  const auto t0 = std::chrono::steady_clock::now();
  auto st = b->apply(tx(6, "v6", "x"));
  ASSERT_FALSE(st);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // bounded by the request timeout
  EXPECT_NE(st.error().find("failed"), std::string::npos) << st.error();
  etcd->start();
  auto snap = b->load();  // the store reloads after a failed write
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 5u);
  ASSERT_TRUE(b->apply(tx(6, "v6", "x")));
}

// A degraded leader (its lease ran out by its own clock) reloads after a write in doubt: the
// backend gives its last committed copy without asking etcd, which would hold the reload (and
// every read on the store's executor) for the request timeout; writes stay refused until a load
// from etcd itself.
TEST_F(EtcdBackendTest, ALeaderWhoseLeaseRanOutReloadsItsLastCommittedCopyWithoutAskingEtcd) {
  auto b = open();
  ASSERT_TRUE(b->load());
  for (std::uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(b->apply(tx(i, "v" + std::to_string(i), "x")));
  std::atomic<bool> lease_valid = true;
  b->require_fence([](const std::string&) {});
  b->set_fence(LeaderFence{.key = "/test/leader", .create_revision = 1, .value = "me",
                           .lease_valid = [&] { return lease_valid.load(); }});
  etcd->kill();
  lease_valid = false;
  const auto t0 = std::chrono::steady_clock::now();
  auto snap = b->load();
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_LT(took, 500ms) << "asked etcd (request timeout 2 s)";
  EXPECT_EQ(snap->index, 3u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 3u);
  EXPECT_TRUE(b->needs_reload());
  EXPECT_FALSE(b->apply(tx(4, "v4", "x")));
}

TEST_F(EtcdBackendTest, TheStateStoreRunsOnItAcrossARestart) {
  boost::asio::io_context io;
  {
    auto b = open();
    StateStore store{io.get_executor(), *b};
    ASSERT_TRUE(store.load());
    for (int i = 0; i < 3; ++i) {
      domain::Node n;
      n.id = "n" + std::to_string(i);
      n.name = n.id;
      Batch batch;
      batch.put(n);
      ASSERT_TRUE(store.commit(std::move(batch)));
    }
  }
  auto b = open();
  StateStore store{io.get_executor(), *b};
  ASSERT_TRUE(store.load());
  EXPECT_NE(store.node("n2"), nullptr);
  EXPECT_EQ(store.nodes().size(), 3u);
}

}  // namespace
}  // namespace mooring::controlplane
