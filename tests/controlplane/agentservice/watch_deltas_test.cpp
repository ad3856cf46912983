// WatchAllocations answers in full only what the agent does not hold as it is now: an allocation
// it names at its current modify index, in the current incarnation of the state, comes by id only.
// An old agent (naming nothing) gets everything in full; another incarnation is a first look; a
// body, and its SecretEnv, goes only to the node the allocation is placed on.
#include <future>

#include "tests/controlplane/agentservice/agent_fixture.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout = 10s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

std::map<std::string, std::uint64_t> in_full(const v1::WatchAllocationsResponse& r) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& a : r.allocations()) out[a.id()] = a.modify_index();
  return out;
}

std::map<std::string, std::uint64_t> unchanged(const v1::WatchAllocationsResponse& r) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& u : r.unchanged()) out[u.id()] = u.modify_index();
  return out;
}

}  // namespace

class WatchDeltasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server.start();
    for (const std::string node : {"n1", "n2"}) {
      v1::RegisterNodeRequest req;
      req.set_node_id(node);
      req.set_name("name-" + node);
      req.set_address("127.0.0.1:4702");
      v1::RegisterNodeResponse resp;
      auto st = server.stub->RegisterNode(context().get(), req, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
    a1 = submit("n1");
    a2 = submit("n1");
  }

  std::string submit(const std::string& node) {
    json body = {{"Allocation",
                  {{"Name", "web"},
                   {"NodeID", node},
                   {"Task", {{"Command", "/bin/true"}, {"SecretEnv", {{"TOKEN", "delta-secret-9d2"}}}}}}}};
    auto r = http_request(server.http_port, "POST", "/v1/allocations", body.dump());
    EXPECT_EQ(r.status, 200u) << r.body;
    return json::parse(r.body, nullptr, false).value("ID", "");
  }

  v1::WatchAllocationsResponse watch(const v1::WatchAllocationsRequest& req, std::chrono::milliseconds timeout = 10s) {
    v1::WatchAllocationsResponse resp;
    auto st = server.stub->WatchAllocations(context(timeout).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  // What an agent asks with after `look`: everything it got, at the index it got it.
  static v1::WatchAllocationsRequest after(const v1::WatchAllocationsResponse& look, std::int64_t wait_ms = 0,
                                           const std::string& node = "n1") {
    v1::WatchAllocationsRequest req;
    req.set_node_id(node);
    req.set_min_index(look.index());
    req.set_wait_ms(wait_ms);
    req.set_incarnation(look.incarnation());
    for (const auto& a : look.allocations()) (*req.mutable_known())[a.id()] = a.modify_index();
    for (const auto& u : look.unchanged()) (*req.mutable_known())[u.id()] = u.modify_index();
    return req;
  }

  v1::WatchAllocationsResponse first_look(const std::string& node = "n1") {
    v1::WatchAllocationsRequest req;
    req.set_node_id(node);
    return watch(req);
  }

  std::uint64_t incarnation() {
    return server.on_io([this] { return server.api.store.incarnation(); });
  }

  AgentServer server;
  std::string a1, a2;
};

TEST_F(WatchDeltasTest, OnlyTheChangedAllocationComesInFullTheOthersByIdAndModifyIndex) {
  const auto look = first_look();
  ASSERT_EQ(look.allocations_size(), 2);
  EXPECT_EQ(look.unchanged_size(), 0);
  EXPECT_EQ(look.incarnation(), incarnation());
  EXPECT_NE(look.incarnation(), 0u);
  const auto index1 = in_full(look).at(a1);

  auto waiter = std::async(std::launch::async, [&] { return watch(after(look, 20000), 30s); });
  std::this_thread::sleep_for(200ms);
  auto r = http_request(server.http_port, "POST", "/v1/allocation/" + a2 + "/stop", "");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  const auto resp = waiter.get();
  EXPECT_GT(resp.index(), look.index());
  EXPECT_EQ(resp.incarnation(), look.incarnation());
  ASSERT_EQ(resp.allocations_size(), 1);
  EXPECT_EQ(resp.allocations(0).id(), a2);
  EXPECT_EQ(resp.allocations(0).desired_status(), v1::DESIRED_STATUS_STOP);
  EXPECT_EQ(resp.allocations(0).task().secret_env().at("TOKEN"), "delta-secret-9d2");
  EXPECT_EQ(unchanged(resp), (std::map<std::string, std::uint64_t>{{a1, index1}}));

  // Nothing changed since: both by id only.
  const auto quiet = watch(after(resp));
  EXPECT_EQ(quiet.allocations_size(), 0);
  EXPECT_EQ(unchanged(quiet).size(), 2u);
  EXPECT_EQ(quiet.SerializeAsString().find("delta-secret-9d2"), std::string::npos);
}

// An answer given while memory ran ahead of the disk carries the store's index, above the
// allocations table's. The next answer must not go below it: the agent would take that for a
// reset of the control plane's state and warn on every fresh start (seen in `make run`).
TEST_F(WatchDeltasTest, TheIndexNeverGoesBelowWhatTheAgentEchoesFromThisIncarnation) {
  const auto look = first_look();
  // Another table moves the store's index past the allocations table's.
  v1::RegisterNodeRequest reg;
  reg.set_node_id("n3");
  reg.set_name("name-n3");
  reg.set_address("127.0.0.1:4702");
  v1::RegisterNodeResponse reg_resp;
  ASSERT_TRUE(server.stub->RegisterNode(context().get(), reg, &reg_resp).ok());
  const auto store_index = server.on_io([this] { return server.api.store.index(); });
  ASSERT_GT(store_index, look.index());

  auto req = after(look);
  req.set_min_index(store_index);  // what an answer during a pending flush handed out
  const auto resp = watch(req);
  EXPECT_GE(resp.index(), store_index);
  EXPECT_EQ(resp.allocations_size(), 0);
  EXPECT_EQ(unchanged(resp).size(), 2u);
}

TEST_F(WatchDeltasTest, AnAgentThatNamesNothingGetsEverythingInFull) {
  const auto look = first_look();
  auto old_agent = after(look);
  old_agent.clear_known();
  old_agent.clear_incarnation();
  auto resp = watch(old_agent);
  EXPECT_EQ(in_full(resp), in_full(look));
  EXPECT_EQ(resp.unchanged_size(), 0);
  // Named at another modify index, or not named: in full.
  auto stale = after(look);
  (*stale.mutable_known())[a1] -= 1;
  stale.mutable_known()->erase(a2);
  resp = watch(stale);
  EXPECT_EQ(in_full(resp), in_full(look));
  EXPECT_EQ(resp.unchanged_size(), 0);
}

// A state loaded again (here: reloaded; a restart, a restore or another leader alike) may reuse a
// modify index for other content: what the agent names from before counts for nothing, and its
// min_index neither, so the answer comes at once, as a first look.
TEST_F(WatchDeltasTest, AnotherIncarnationIsAnsweredAtOnceAndInFull) {
  const auto look = first_look();
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    server.api.settle();
    // Not while a flush has the backend (a liveness commit may have started one since).
    reloaded = server.on_io([this] { return !server.api.store.flushing() && server.api.store.reload().ok(); });
  }
  ASSERT_TRUE(reloaded);
  const auto now = incarnation();
  EXPECT_NE(now, look.incarnation());
  const auto t0 = std::chrono::steady_clock::now();
  auto resp = watch(after(look, 20000), 30s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "another incarnation does not wait";
  EXPECT_EQ(resp.incarnation(), now);
  EXPECT_EQ(in_full(resp).size(), 2u);
  EXPECT_EQ(resp.unchanged_size(), 0);
  // From then on, in that incarnation, by id again.
  resp = watch(after(resp));
  EXPECT_EQ(resp.allocations_size(), 0);
  EXPECT_EQ(resp.unchanged_size(), 2);
}

// Naming another node's allocation, even at its right modify index, yields neither its id nor
// its body: an answer lists the asking node's allocations only.
TEST_F(WatchDeltasTest, NamingAnotherNodesAllocationYieldsNothingOfIt) {
  const auto mine = first_look();
  const auto theirs = first_look("n2");
  EXPECT_EQ(theirs.allocations_size(), 0);
  auto req = after(mine, 0, "n2");
  req.set_incarnation(theirs.incarnation());
  auto resp = watch(req);
  EXPECT_EQ(resp.allocations_size(), 0);
  EXPECT_EQ(resp.unchanged_size(), 0);
  const auto text = resp.SerializeAsString();
  EXPECT_EQ(text.find(a1), std::string::npos);
  EXPECT_EQ(text.find("delta-secret-9d2"), std::string::npos);
}

}  // namespace mooring::controlplane
