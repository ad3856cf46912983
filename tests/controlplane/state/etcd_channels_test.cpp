// The connection to etcd (EtcdChannels) against a real three-member etcd addressed by names:
// every endpoint is used, so killing the first-listed member stops neither the backend's writes
// nor the leader's lease renewals, and a control plane started while it is down still connects.
#include "services/controlplane/state/etcd/etcd_channels.hpp"
#include "services/controlplane/state/etcd/etcd_backend.hpp"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "services/controlplane/ha/leader_election.hpp"
#include "tests/controlplane/support/etcd_raft.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::controlplane {
namespace {

using namespace std::chrono_literals;

// As mooring-controlplane's main sets it, before gRPC starts.
[[maybe_unused]] const int kNativeResolver = ::setenv("GRPC_DNS_RESOLVER", "native", 0);

class EtcdChannelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
    cluster = std::make_unique<test::EtcdCluster>(dir.path() / "etcd");
    cluster->start();
  }
  std::size_t member_where_leader_is(bool leader) const {
    auto member = test::etcd_member_where_leader_is(*cluster, leader);
    if (!member) ADD_FAILURE() << "no etcd member says etcd_server_is_leader " << leader;
    return member.value_or(0);
  }
  // A member that is not etcd's raft leader: killing it tests our client, not the 1-2 s etcd
  // takes to elect a new raft leader.
  std::size_t follower() const { return member_where_leader_is(false); }
  std::size_t raft_leader() const { return member_where_leader_is(true); }
  // Every member by name, `first` listed first: "localhost" resolves to ::1 and 127.0.0.1 and
  // etcd listens on the second only, so each name also needs its addresses tried in turn.
  EtcdOptions by_name(std::size_t first) const {
    EtcdOptions o;
    for (std::size_t k = 0; k < cluster->size(); ++k) {
      const auto ep = cluster->member((first + k) % cluster->size()).endpoint();
      o.endpoints.push_back("localhost" + ep.substr(ep.rfind(':')));
    }
    o.prefix = "/names";
    o.timeout = 2s;
    return o;
  }
  static Transaction tx(std::uint64_t index, std::string key) {
    return Transaction{index, {{Table::volumes, std::move(key), std::string("x")}}, {Table::volumes}};
  }

  test::TempDir dir{"mooring-etcd-channels"};
  std::unique_ptr<test::EtcdCluster> cluster;
};

TEST(EtcdChannels, IpEndpointsShareOneChannelAndNamesGetOneEach) {
  EtcdOptions ips;
  ips.endpoints = {"10.0.0.1:2379", "10.0.0.2:2379"};
  auto a = EtcdChannels::make(ips);
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ((*a)->targets(), (std::vector<std::string>{"ipv4:10.0.0.1:2379,10.0.0.2:2379"}));
  EtcdOptions names;
  names.endpoints = {"etcd-0.etcd:2379", "10.0.0.2:2379"};
  auto b = EtcdChannels::make(names);
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ((*b)->targets(), (std::vector<std::string>{"dns:///etcd-0.etcd:2379", "dns:///10.0.0.2:2379"}));
}

// Over TLS every endpoint is dialled on its own channel, so each member's certificate is checked
// against its own address: one channel over the list would check them against the list itself,
// which no certificate names (make run-ha's three members over TLS never connected that way).
TEST(EtcdChannels, OverTlsIpEndpointsGetAChannelEachAndEveryMemberServes) {
  if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir("mooring-etcd-tls");
  test::TestPki pki(dir.path() / "pki", "etcd");
  const auto member = pki.server();  // names 127.0.0.1
  test::EtcdCluster cluster(dir.path() / "etcd", 3, test::EtcdTls{member.ca, member.cert, member.key});
  cluster.start();
  const auto client = pki.cli();
  EtcdOptions o;
  for (std::size_t i = 0; i < cluster.size(); ++i) o.endpoints.push_back(cluster.member(i).endpoint());
  o.ca_file = client.ca;
  o.cert_file = client.cert;
  o.key_file = client.key;
  o.prefix = "/tls";
  o.timeout = 5s;
  auto channels = EtcdChannels::make(o);
  ASSERT_TRUE(channels) << channels.error();
  EXPECT_EQ((*channels)->targets().size(), 3u);
  for (std::size_t first = 0; first < cluster.size(); ++first) {
    // Each member first in turn: each is dialled and its certificate accepted.
    EtcdOptions each = o;
    std::rotate(each.endpoints.begin(), each.endpoints.begin() + static_cast<long>(first), each.endpoints.end());
    auto b = EtcdBackend::open(each);
    ASSERT_TRUE(b) << b.error();
    auto loaded = (*b)->load();
    ASSERT_TRUE(loaded) << "first endpoint " << each.endpoints.front() << ": " << loaded.error();
    const Transaction tx{loaded->index + 1, {{Table::volumes, "k" + std::to_string(first), std::string("x")}},
                         {Table::volumes}};
    auto st = (*b)->apply(tx);
    ASSERT_TRUE(st) << st.error();
  }
}

TEST(EtcdChannels, BadTlsSettingsNameTheFlag) {
  EtcdOptions o;
  o.endpoints = {"etcd:2379"};
  o.cert_file = "/nonexistent/cert.pem";
  auto r = EtcdChannels::make(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("--etcd-cacert"), std::string::npos) << r.error();
}

TEST_F(EtcdChannelsTest, WritesGoOnWhenTheFirstListedMemberIsKilled) {
  const auto first = follower();
  auto b = EtcdBackend::open(by_name(first));
  ASSERT_TRUE(b) << b.error();
  ASSERT_TRUE((*b)->load());
  for (std::uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE((*b)->apply(tx(i, "v" + std::to_string(i))));

  cluster->kill(first);
  const auto t0 = std::chrono::steady_clock::now();
  auto st = (*b)->apply(tx(4, "v4"));
  ASSERT_TRUE(st) << st.error();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);

  // A control plane that starts while the first member is down connects to the others.
  auto fresh = EtcdBackend::open(by_name(first));
  ASSERT_TRUE(fresh) << fresh.error();
  auto snap = (*fresh)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 4u);
}

TEST_F(EtcdChannelsTest, TheLeaderKeepsItsLeaseWhenTheFirstListedMemberIsKilled) {
  const auto first = follower();
  auto channels = EtcdChannels::make(by_name(first));
  ASSERT_TRUE(channels) << channels.error();
  std::atomic<bool> elected{false}, lost{false}, degraded{false};
  ha::LeaderElection election(
      ha::ElectionOptions{.etcd = *channels,
                          .key = "/names/leader",
                          .self = {.id = "a", .http_addr = "http://127.0.0.1:1", .grpc_addr = "127.0.0.1:2"},
                          .lease = 2s},
      ha::ElectionEvents{.elected = [&](LeaderFence) { elected = true; },
                         .lost = [&](const std::string&) { lost = true; },
                         .degraded = [&](const std::string&) { degraded = true; },
                         .restored = [] {}});
  election.start();
  for (int i = 0; i < 100 && !elected; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(elected);

  cluster->kill(first);
  std::this_thread::sleep_for(6s);  // three leases: every renewal went to another member
  EXPECT_FALSE(lost);
  EXPECT_FALSE(degraded) << "a renewal went unanswered for a whole lease";
  EXPECT_TRUE(election.leading());
  election.stop();
}

// etcd's own raft leader killed: no renewal is answered until etcd elects another (1-2 s), which
// a 2 s lease renewed every half second may not outlast. A write then waits (await_lease, as the
// backend's fence does) instead of failing: the renewal a follower held through the election is
// answered as soon as there is a new raft leader, with the lease extended, so leadership stays.
TEST_F(EtcdChannelsTest, AWriteWaitsOutEtcdsRaftElectionAndTheLeaderKeepsItsLease) {
  auto channels = EtcdChannels::make(by_name(0));
  ASSERT_TRUE(channels) << channels.error();
  std::atomic<bool> elected{false}, lost{false};
  std::atomic<int> degraded{0};
  ha::LeaderElection election(
      ha::ElectionOptions{.etcd = *channels,
                          .key = "/raft/leader",
                          .self = {.id = "a", .http_addr = "http://127.0.0.1:1", .grpc_addr = "127.0.0.1:2"},
                          .lease = 2s},
      ha::ElectionEvents{.elected = [&](LeaderFence) { elected = true; },
                         .lost = [&](const std::string&) { lost = true; },
                         .degraded = [&](const std::string&) { ++degraded; },
                         .restored = [] {}});
  election.start();
  for (int i = 0; i < 100 && !elected; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(elected);

  for (int round = 0; round < 2; ++round) {
    const auto killed_member = raft_leader();
    cluster->kill(killed_member);
    const auto t0 = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration longest_wait{};
    int refused = 0;
    while (std::chrono::steady_clock::now() - t0 < 6s) {  // three leases
      const auto asked = std::chrono::steady_clock::now();
      if (!election.lease_valid() && !election.await_lease()) ++refused;
      longest_wait = std::max(longest_wait, std::chrono::steady_clock::now() - asked);
      std::this_thread::sleep_for(20ms);
    }
    std::cerr << "raft leader killed: the longest wait for the lease "
              << std::chrono::duration_cast<std::chrono::milliseconds>(longest_wait).count() << " ms; degraded "
              << degraded.load() << " times so far\n";
    EXPECT_EQ(refused, 0) << "a write was refused during etcd's election";
    EXPECT_LT(longest_wait, 2s);
    EXPECT_FALSE(lost);
    EXPECT_TRUE(election.lease_valid());
    cluster->start(killed_member);
  }
  election.stop();
}

// A member that could not load the state when it last led (main.cpp's MOORING_FAILED_LOADS)
// starts its election with a delay: it names nobody and takes no lease until the delay is over,
// although the key is free, so a member that can load wins first.
TEST_F(EtcdChannelsTest, AnElectionWithACampaignDelayTakesNoLeaseBeforeItEnds) {
  auto channels = EtcdChannels::make(by_name(0));
  ASSERT_TRUE(channels) << channels.error();
  std::atomic<bool> elected{false};
  ha::LeaderElection election(
      ha::ElectionOptions{.etcd = *channels,
                          .key = "/held/leader",
                          .self = {.id = "b", .http_addr = "http://127.0.0.1:1", .grpc_addr = "127.0.0.1:2"},
                          .lease = 1s,
                          .campaign_delay = 3s},
      ha::ElectionEvents{.elected = [&](LeaderFence) { elected = true; },
                         .lost = [](const std::string&) {},
                         .degraded = [](const std::string&) {},
                         .restored = [] {}});
  const auto t0 = std::chrono::steady_clock::now();
  election.start();
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(elected) << "campaigned before its delay ended";
  EXPECT_FALSE(election.leader());
  EXPECT_NE(election.etcd_problem().find("holds back"), std::string::npos) << election.etcd_problem();
  for (int i = 0; i < 100 && !elected; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(elected) << "never campaigned after its delay";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 3s);
  election.stop();
}

// etcd drops the proposals in flight when its raft leader dies: a commit sent through a follower
// right then was never answered and failed, in doubt, at the request timeout. It is sent again
// (its compare on head makes a second apply impossible) and commits once a new leader is elected.
TEST_F(EtcdChannelsTest, ACommitCaughtByTheRaftLeadersDeathIsSentAgainAndCommitsOnce) {
  const auto leader = raft_leader();
  const auto through = (leader + 1) % cluster->size();
  auto options = by_name(through);
  options.endpoints.resize(1);  // only the follower: the test is etcd's election, not our failover
  // The default: sent once, such a commit waited out etcd's own ~7 s and failed at this timeout.
  options.timeout = 5s;
  options.commit_attempt = 500ms;
  auto b = EtcdBackend::open(options);
  ASSERT_TRUE(b) << b.error();
  ASSERT_TRUE((*b)->load());
  ASSERT_TRUE((*b)->apply(tx(1, "before")));

  cluster->kill(leader);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 2; i <= 6; ++i) {
    auto st = (*b)->apply(tx(i, "during-" + std::to_string(i)));
    ASSERT_TRUE(st) << "commit " << i << " after the raft leader was killed: " << st.error();
  }
  std::cerr << "five commits across etcd's election: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
            << " ms\n";

  auto fresh = EtcdBackend::open(options);
  ASSERT_TRUE(fresh) << fresh.error();
  auto snap = (*fresh)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 6u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 6u);
}

// A send not answered within its attempt (here 1 ms, so the first ones time out while etcd
// commits them) is sent again; the resend fails its compare on head, finds our own index there,
// and the commit counts as done, once.
TEST_F(EtcdChannelsTest, ACommitWhoseFirstSendCommittedUnansweredIsNotAppliedTwice) {
  auto options = by_name(0);
  options.timeout = 5s;
  options.commit_attempt = 1ms;
  auto channels = EtcdChannels::make(options);
  ASSERT_TRUE(channels) << channels.error();
  // A leader's backend: only then is our index in head proof that the first send committed.
  std::optional<LeaderFence> fence;
  std::mutex mu;
  ha::LeaderElection election(
      ha::ElectionOptions{.etcd = *channels,
                          .key = "/names/leader",
                          .self = {.id = "c", .http_addr = "http://127.0.0.1:1", .grpc_addr = "127.0.0.1:2"},
                          .lease = 5s},
      ha::ElectionEvents{.elected = [&](LeaderFence f) { std::lock_guard l(mu); fence = std::move(f); },
                         .lost = [](const std::string&) {},
                         .degraded = [](const std::string&) {},
                         .restored = [] {}});
  election.start();
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard l(mu);
      if (fence) break;
    }
    std::this_thread::sleep_for(50ms);
  }
  std::optional<LeaderFence> held;
  {
    std::lock_guard l(mu);
    held = fence;
  }
  ASSERT_TRUE(held) << "not elected";
  auto b = EtcdBackend::open(options);
  ASSERT_TRUE(b) << b.error();
  (*b)->set_fence(*held);
  ASSERT_TRUE((*b)->load());
  for (std::uint64_t i = 1; i <= 20; ++i) {
    auto st = (*b)->apply(tx(i, "v" + std::to_string(i)));
    ASSERT_TRUE(st) << "commit " << i << ": " << st.error();
  }
  auto fresh = EtcdBackend::open(by_name(0));
  ASSERT_TRUE(fresh) << fresh.error();
  auto snap = (*fresh)->load();
  ASSERT_TRUE(snap) << snap.error();
  EXPECT_EQ(snap->index, 20u);
  EXPECT_EQ(snap->rows[Table::volumes].size(), 20u);
  election.stop();
}

}  // namespace
}  // namespace mooring::controlplane
