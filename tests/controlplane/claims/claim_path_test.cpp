// The claim path without sockets: a store over an in-memory backend, a scripted publisher, and
// the claim plan it starts from.
#include "services/controlplane/claims/claim_path.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include <thread>

#include "services/controlplane/claims/operation_id.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/scripted_publisher.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;
using grpc::StatusCode;

namespace {

// One node "n1" with a monolith plugin that attaches (ControllerPublish needed), a volume and
// allocations "a1", "a2" on n1 that request it for writing.
class ClaimPathTest : public ::testing::Test {
 protected:
  ClaimPathTest() {
    EXPECT_TRUE(store.load());
    auto plugin = fixtures::plugin("hostpath", "n1", true);
    for (auto* map : {&plugin.controllers, &plugin.nodes})
      for (auto& [id, inst] : *map) inst.controller_info->supports_attach_detach = true;
    domain::Node node;
    node.id = "n1";
    node.status = domain::NodeStatus::ready;
    node.plugins["hostpath"] = plugin.nodes.at("n1");
    Batch batch;
    batch.put(node);  // carries the plugin's instance: the aggregate follows
    batch.put(fixtures::volume("vol-1"));
    for (const char* id : {"a1", "a2"}) {
      auto alloc = fixtures::allocation(id, "n1");
      alloc.volumes["data"] = {.name = "data",
                               .source = "vol-1",
                               .access_mode = domain::AccessMode::single_node_writer,
                               .attachment_mode = domain::AttachmentMode::file_system};
      batch.put(alloc);
    }
    EXPECT_TRUE(store.commit(std::move(batch)));
  }

  static ClaimInput input(std::string alloc = "a1") {
    return {.volume_key = "vol-1",
            .allocation_id = std::move(alloc),
            .node_id = "n1",
            .mode = domain::ClaimMode::write,
            .access_mode = domain::AccessMode::single_node_writer,
            .attachment_mode = domain::AttachmentMode::file_system};
  }

  ClaimAnswer claim(ClaimInput in) {
    std::optional<ClaimAnswer> out;
    asio::co_spawn(io, path.claim(std::move(in)), [&](std::exception_ptr e, ClaimAnswer a) {
      if (e) std::rethrow_exception(e);
      out = std::move(a);
    });
    io.run();
    io.restart();
    return std::move(*out);
  }

  // vol-1 with a1's claim taken and its publish pending: the intent a dead leader left.
  domain::Volume pending_claim() {
    auto volume = *store.volume("vol-1");
    auto c = fixtures::claim("a1", "n1", domain::ClaimState::taken);
    c.last_error = kPublishPending;
    c.controller_publish = domain::ControllerPublish::sent;
    volume.claims["a1"] = c;
    volume.access_mode = domain::AccessMode::single_node_writer;
    volume.attachment_mode = domain::AttachmentMode::file_system;
    return volume;
  }

  // Its desired status set to stop: its claims are leaving.
  void stop_allocation(const std::string& id) {
    auto a = *store.allocation(id);
    a.desired_status = domain::DesiredStatus::stop;
    Batch stop;
    stop.put(a);
    ASSERT_TRUE(store.commit(std::move(stop)));
  }

  const domain::Claim* stored_claim(const std::string& alloc) {
    const auto* v = store.volume("vol-1");
    auto it = v->claims.find(alloc);
    return it == v->claims.end() ? nullptr : &it->second;
  }

  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  ScriptedPublisher publisher;
  ClaimPath path{io.get_executor(), store, &publisher};
};

}  // namespace

TEST_F(ClaimPathTest, ANewClaimIsPublishedWithTheCsiNodeIdAndKeepsTheContext) {
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(answer));
  const auto& granted = std::get<GrantedClaim>(answer);
  EXPECT_EQ(granted.claim.publish_context.at("device"), "/dev/fake-vol-1");
  EXPECT_FALSE(granted.read_only);
  ASSERT_EQ(publisher.calls.size(), 1u);
  EXPECT_EQ(publisher.calls[0].csi_node_id, "csi-n1");
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_FALSE(publish_pending(*stored_claim("a1")));
}

// The agent that asked stops waiting (its claim RPC is cancelled) while the ControllerPublish is
// at the plugin: the call runs to its answer and the claim is settled by it. Cancelled with the
// RPC, it gave up the volume's router lock while the plugin still published, and a release's
// ControllerUnpublish overtook it (the 30-minute chaos run of 2026-11-29, release-order).
TEST_F(ClaimPathTest, APublishUnderWayRunsToItsAnswerWhenTheClaimantStopsWaiting) {
  publisher.delay = std::chrono::milliseconds(200);
  asio::cancellation_signal cancel;
  bool finished = false;
  asio::co_spawn(
      io, path.claim(input()),
      asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr, ClaimAnswer) { finished = true; }));
  asio::steady_timer soon(io, std::chrono::milliseconds(20));
  soon.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  io.restart();
  EXPECT_TRUE(finished);
  ASSERT_EQ(publisher.calls.size(), 1u);
  EXPECT_EQ(publisher.answered, 1) << "the publish was cancelled with the claimant";
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_FALSE(publish_pending(*stored_claim("a1"))) << "the publish's answer was not recorded";
}

// A writer's release on n1 is about to send (or sending) its ControllerUnpublish: a reader's
// claim on n1 is refused, retryably, with nothing written and nothing published, and goes
// through once the writer is freed. Published before it, the reader's publish would be undone
// by that unpublish, or refused beside the writer's (the chaos checker's release-order race).
TEST_F(ClaimPathTest, ANewClaimWaitsForAReleaseOnItsNodeWhoseControllerDetachIsNext) {
  auto volume = *store.volume("vol-1");
  auto writer = fixtures::claim("a1", "n1", domain::ClaimState::node_detached);
  writer.controller_publish = domain::ControllerPublish::sent;
  volume.claims["a1"] = writer;
  volume.access_mode = domain::AccessMode::single_node_writer;
  volume.attachment_mode = domain::AttachmentMode::file_system;
  Batch batch;
  batch.put(volume);
  ASSERT_TRUE(store.commit(std::move(batch)));
  const auto writes = backend.transactions.size();

  auto reader = input("a2");
  reader.mode = domain::ClaimMode::read;
  auto answer = claim(reader);
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  const auto& failure = std::get<ClaimFailure>(answer);
  EXPECT_EQ(failure.refusal.kind, Refusal::Kind::unavailable);
  EXPECT_FALSE(failure.code);
  EXPECT_NE(failure.refusal.message.find("\"a1\""), std::string::npos) << failure.refusal.message;
  EXPECT_NE(failure.refusal.message.find("node-detached"), std::string::npos) << failure.refusal.message;
  EXPECT_TRUE(publisher.calls.empty());
  EXPECT_EQ(stored_claim("a2"), nullptr);
  EXPECT_EQ(backend.transactions.size(), writes);

  volume = *store.volume("vol-1");
  volume.claims.erase("a1");  // the GC freed it after its unpublish
  Batch freed;
  freed.put(volume);
  ASSERT_TRUE(store.commit(std::move(freed)));
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(reader)));
  ASSERT_EQ(publisher.calls.size(), 1u);
  EXPECT_EQ(publisher.calls[0].allocation_id, "a2");
}

// One controller timed out (its publish may still land), the next refused for good: the claim
// is released with ControllerUnpublish, not dropped, or a late publish would outlive it.
TEST_F(ClaimPathTest, ARefusalAfterAnotherControllersUncertainAnswerLeavesTheClaimForRelease) {
  auto refused = ScriptedPublisher::failure(StatusCode::ALREADY_EXISTS);
  refused.uncertain_earlier = true;
  publisher.script.push_back(refused);
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  EXPECT_EQ(std::get<ClaimFailure>(answer).refusal.kind, Refusal::Kind::unavailable);
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_EQ(stored_claim("a1")->state, domain::ClaimState::unpublishing);
  // (Without it the same refusal is certain: APublishThatSurelyFailedFreesTheClaimAndPassesTheCodeOn.)
}

TEST_F(ClaimPathTest, AReClaimAnswersFromTheStoreWithoutPublishingOrWriting) {
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input())));
  const auto writes = backend.transactions.size();
  auto again = claim(input());
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(again));
  EXPECT_EQ(std::get<GrantedClaim>(again).claim.publish_context.at("device"), "/dev/fake-vol-1");
  EXPECT_EQ(publisher.calls.size(), 1u);
  EXPECT_EQ(backend.transactions.size(), writes);
}

TEST_F(ClaimPathTest, APublishThatSurelyFailedFreesTheClaimAndPassesTheCodeOn) {
  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::INVALID_ARGUMENT));
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  EXPECT_EQ(std::get<ClaimFailure>(answer).code, StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(stored_claim("a1"), nullptr);
}

TEST_F(ClaimPathTest, APublishNeverSentFreesTheClaimAndIsRetryable) {
  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::UNAVAILABLE, /*sent=*/false));
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  const auto& failure = std::get<ClaimFailure>(answer);
  EXPECT_FALSE(failure.code);
  EXPECT_EQ(failure.refusal.kind, Refusal::Kind::unavailable);
  EXPECT_EQ(stored_claim("a1"), nullptr);
}

TEST_F(ClaimPathTest, APublishThatMayHaveHappenedLeavesTheClaimForRelease) {
  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::DEADLINE_EXCEEDED));
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  EXPECT_EQ(std::get<ClaimFailure>(answer).refusal.kind, Refusal::Kind::unavailable);
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_EQ(stored_claim("a1")->state, domain::ClaimState::unpublishing);
}

// A claim whose publish a dead leader sent (pending), claimed again while no controller can be
// asked (the controller's agent restarting: its node is up, its plugin not healthy again yet):
// the claim keeps waiting, and the next claim sends the same publish (same operation id).
TEST_F(ClaimPathTest, APendingPublishThatReachedNoControllerKeepsWaitingAndIsSentAgainAsTheSameCall) {
  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::UNAVAILABLE));  // sent, then lost
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(claim(input())));
  ASSERT_EQ(stored_claim("a1")->state, domain::ClaimState::unpublishing);
  // Rewind to the state a dead leader leaves: the claim taken, its publish pending.
  auto volume = *store.volume("vol-1");
  volume.claims.at("a1").state = domain::ClaimState::taken;
  volume.claims.at("a1").last_error = kPublishPending;
  Batch batch;
  batch.put(volume);
  ASSERT_TRUE(store.commit(std::move(batch)));

  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::UNAVAILABLE, /*sent=*/false));
  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(answer));
  EXPECT_EQ(std::get<ClaimFailure>(answer).refusal.kind, Refusal::Kind::unavailable);
  EXPECT_NE(std::get<ClaimFailure>(answer).refusal.message.find("retry the claim"), std::string::npos);
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_TRUE(publish_pending(*stored_claim("a1"))) << "kept waiting, not released";

  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input())));
  ASSERT_EQ(publisher.calls.size(), 3u);
  EXPECT_EQ(publish_operation_id("vol-1", "a1", publisher.calls[2].claim),
            publish_operation_id("vol-1", "a1", publisher.calls[1].claim));
  EXPECT_FALSE(publish_pending(*stored_claim("a1")));
}

// The same with the controller's node marked down: really gone, released as before.
TEST_F(ClaimPathTest, APendingPublishWhoseControllersNodeIsDownIsReleasedAsBefore) {
  auto volume = pending_claim();
  auto node = *store.node("n1");
  node.status = domain::NodeStatus::down;
  Batch batch;
  batch.put(volume);
  batch.put(node);
  ASSERT_TRUE(store.commit(std::move(batch)));

  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::UNAVAILABLE, /*sent=*/false));
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(claim(input())));
  ASSERT_NE(stored_claim("a1"), nullptr);
  EXPECT_EQ(stored_claim("a1")->state, domain::ClaimState::unpublishing);
}

// Its intent says it needs ControllerPublish: a pending claim is published again even while the
// plugin's facts are unknown (its controller's agent restarted and has not fingerprinted it yet),
// never granted without a publish context.
TEST_F(ClaimPathTest, APendingClaimIsPublishedAgainWhileThePluginsFactsAreUnknown) {
  auto volume = pending_claim();
  auto plugin = *store.plugin("hostpath");
  for (auto* map : {&plugin.controllers, &plugin.nodes})
    for (auto& [id, inst] : *map) inst.controller_info.reset();
  Batch batch;
  batch.put(volume);
  fixtures::put_running(batch, {plugin}, &store);
  ASSERT_TRUE(store.commit(std::move(batch)));

  auto answer = claim(input());
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(answer));
  EXPECT_EQ(publisher.calls.size(), 1u);
  EXPECT_EQ(std::get<GrantedClaim>(answer).claim.publish_context.at("device"), "/dev/fake-vol-1");
}

TEST_F(ClaimPathTest, OperationIdsComeFromCommittedStateSoAnotherLeaderDerivesTheSameAndANewClaimANewOne) {
  // A first claim of a1 dropped (the controller refused it for good), then a second one granted.
  publisher.script.push_back(ScriptedPublisher::failure(StatusCode::INVALID_ARGUMENT));
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(claim(input())));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // create times are in milliseconds
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input())));
  ASSERT_EQ(publisher.calls.size(), 2u);
  const auto dropped = publish_operation_id("vol-1", "a1", publisher.calls[0].claim);
  const auto granted = publish_operation_id("vol-1", "a1", publisher.calls[1].claim);
  EXPECT_NE(dropped, granted);
  EXPECT_NE(unpublish_operation_id("vol-1", "a1", publisher.calls[0].claim),
            unpublish_operation_id("vol-1", "a1", publisher.calls[1].claim));
  EXPECT_NE(granted, unpublish_operation_id("vol-1", "a1", publisher.calls[1].claim));

  // Another control plane loading the same committed state (a new leader) derives the same ids
  // as the one that sent the call.
  StateStore other{io.get_executor(), backend};
  ASSERT_TRUE(other.load());
  const domain::Claim& loaded = other.volume("vol-1")->claims.at("a1");
  EXPECT_EQ(publish_operation_id("vol-1", "a1", loaded), granted);
  EXPECT_EQ(unpublish_operation_id("vol-1", "a1", loaded), unpublish_operation_id("vol-1", "a1", *stored_claim("a1")));
  // And so from what was committed before the publish answered (the intent the old leader sent
  // from): the answer changes the claim, not its id.
  EXPECT_EQ(publish_operation_id("vol-1", "a1", loaded), publish_operation_id("vol-1", "a1", publisher.calls[1].claim));
}

TEST_F(ClaimPathTest, ClaimsOfOneVolumeNeverPublishAtTheSameTime) {
  publisher.delay = std::chrono::milliseconds(20);
  std::vector<ClaimAnswer> answers;
  for (const char* alloc : {"a1", "a1"})
    asio::co_spawn(io, path.claim(input(alloc)), [&](std::exception_ptr e, ClaimAnswer a) {
      if (e) std::rethrow_exception(e);
      answers.push_back(std::move(a));
    });
  io.run();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(publisher.max_in_flight, 1);
  EXPECT_EQ(publisher.calls.size(), 1u);  // the second saw the published claim
}

TEST_F(ClaimPathTest, WithoutAPublisherANewClaimIsRefusedAndNothingIsWritten) {
  ClaimPath without{io.get_executor(), store, nullptr};
  const auto writes = backend.transactions.size();
  std::optional<ClaimAnswer> out;
  asio::co_spawn(io, without.claim(input()), [&](std::exception_ptr, ClaimAnswer a) { out = std::move(a); });
  io.run();
  ASSERT_TRUE(out && std::holds_alternative<ClaimFailure>(*out));
  EXPECT_EQ(std::get<ClaimFailure>(*out).refusal.kind, Refusal::Kind::unavailable);
  EXPECT_EQ(backend.transactions.size(), writes);
}

TEST_F(ClaimPathTest, NodeDetachedAdvancesOnceAndRefusesAnotherNode) {
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input())));
  EXPECT_EQ(path.node_detached("vol-1", "a1", "n2")->kind, Refusal::Kind::invalid);
  EXPECT_FALSE(path.node_detached("vol-1", "a1", "n1"));
  EXPECT_EQ(stored_claim("a1")->state, domain::ClaimState::node_detached);
  const auto writes = backend.transactions.size();
  EXPECT_FALSE(path.node_detached("vol-1", "a1", "n1"));  // idempotent
  EXPECT_FALSE(path.node_detached("vol-1", "gone", "n1"));
  EXPECT_FALSE(path.node_detached("no-volume", "a1", "n1"));
  EXPECT_EQ(backend.transactions.size(), writes);
}

// A drain's handoff: a1 is stopping and still holds the single-writer volume. a2's claim is not
// refused: it waits on the volume table and is granted by the commit that frees a1's claim, not
// by a poll. A holder that is not leaving is a plain conflict, answered at once.
TEST_F(ClaimPathTest, AClaimHeldOnlyByAStoppingAllocationWaitsAndIsGrantedWhenItsClaimIsFreed) {
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input("a1"))));
  auto refused = claim(input("a2"));  // a1 runs: a conflict at once
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(refused));
  EXPECT_EQ(std::get<ClaimFailure>(refused).refusal.kind, Refusal::Kind::conflict);

  stop_allocation("a1");
  std::optional<ClaimAnswer> out;
  asio::co_spawn(io, path.claim(input("a2")), [&](std::exception_ptr e, ClaimAnswer a) {
    if (e) std::rethrow_exception(e);
    out = std::move(a);
  });
  io.poll();
  EXPECT_FALSE(out) << "answered while a1 still holds the volume";
  auto volume = *store.volume("vol-1");
  volume.claims.erase("a1");  // the GC frees it after the unmount and the controller detach
  Batch freed;
  freed.put(volume);
  ASSERT_TRUE(store.commit(std::move(freed)));
  for (int i = 0; i < 100 && !out; ++i) io.poll();  // woken by the commit: no timer runs
  ASSERT_TRUE(out);
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(*out));
  EXPECT_EQ(publisher.calls.back().allocation_id, "a2");
  io.restart();
}

// The claim of an allocation that is stopping itself: its agent may not have heard of the stop
// yet. Refused at once as a state (FAILED_PRECONDITION: the agent retries until the stop reaches
// it, and the allocation ends stopped, not failed), never held for a release, which could not make
// it grantable.
TEST_F(ClaimPathTest, AStoppingAllocationsClaimIsAConflictAnsweredAtOnce) {
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input("a1"))));
  stop_allocation("a1");
  stop_allocation("a2");
  const auto started = std::chrono::steady_clock::now();
  auto refused = claim(input("a2"));  // a1 leaving holds the volume: a running a2 would wait
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(refused));
  EXPECT_EQ(std::get<ClaimFailure>(refused).refusal.kind, Refusal::Kind::conflict);

  // With the volume free, the refusal says why.
  auto volume = *store.volume("vol-1");
  volume.claims.erase("a1");
  Batch freed;
  freed.put(volume);
  ASSERT_TRUE(store.commit(std::move(freed)));
  refused = claim(input("a2"));
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(refused));
  const auto& why = std::get<ClaimFailure>(refused).refusal;
  EXPECT_EQ(why.kind, Refusal::Kind::conflict);
  EXPECT_NE(why.message.find("is stopping and takes no new claims"), std::string::npos) << why.message;
}

TEST_F(ClaimPathTest, AHandoffWaitThatEndsAnswersTheConflict) {
  ClaimPath brief{io.get_executor(), store, &publisher, std::chrono::milliseconds(50)};
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim(input("a1"))));
  stop_allocation("a1");
  std::optional<ClaimAnswer> out;
  asio::co_spawn(io, brief.claim(input("a2")), [&](std::exception_ptr e, ClaimAnswer a) {
    if (e) std::rethrow_exception(e);
    out = std::move(a);
  });
  io.run_for(std::chrono::seconds(5));
  ASSERT_TRUE(out);
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(*out));
  EXPECT_NE(std::get<ClaimFailure>(*out).refusal.message.find("\"a1\""), std::string::npos);
}

TEST(ClaimPlan, AnAllocationOnAnotherNodeIsRefusedBeforeAnythingElse) {
  auto volume = fixtures::volume("vol-1");
  auto alloc = fixtures::allocation("a1", "n2");
  domain::Node node;
  node.id = "n1";
  ClaimInput in{.volume_key = "vol-1", .allocation_id = "a1", .node_id = "n1"};
  auto plan = plan_claim(in, &node, &volume, &alloc, nullptr, true, domain::now());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.refusal().kind, Refusal::Kind::invalid);
  EXPECT_NE(plan.refusal().message.find("placed on node \"n2\""), std::string::npos);
  EXPECT_EQ(plan_claim(in, nullptr, &volume, &alloc, nullptr, true, domain::now()).refusal().kind,
            Refusal::Kind::not_found);
}

}  // namespace mooring::controlplane
