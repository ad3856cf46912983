// The bodies a node agent holds from its watch: an answer that names allocations unchanged is
// completed from them, and refused when it cannot be (another incarnation, an index that went
// backwards, an id or modify index the agent did not ask with).
#include "services/nodeagent/allocrunner/watched_allocations.hpp"

#include <gtest/gtest.h>

namespace mooring::nodeagent {
namespace {

using Known = std::map<std::string, std::uint64_t>;

domain::Allocation alloc(const std::string& id, std::uint64_t modify_index, const std::string& name = "web") {
  domain::Allocation a;
  a.id = id;
  a.name = name;
  a.node_id = "n1";
  a.modify_index = modify_index;
  return a;
}

const auto everything = [](const std::string&) { return false; };

class WatchedAllocationsTest : public ::testing::Test {
 protected:
  // Held: a1@3 ("first"), a2@4, in incarnation 9 at index 10.
  void SetUp() override {
    auto taken = watched.take({.index = 10, .incarnation = 9, .changed = {alloc("a1", 3, "first"), alloc("a2", 4)}}, {});
    ASSERT_TRUE(taken) << taken.error();
    ASSERT_EQ(watched.known(everything), (Known{{"a1", 3}, {"a2", 4}}));
  }
  void expect_forgotten() {
    EXPECT_EQ(watched.index(), 0u);
    EXPECT_EQ(watched.incarnation(), 0u);
    EXPECT_TRUE(watched.known(everything).empty()) << "the next request is a first look";
  }

  WatchedAllocations watched;
};

TEST_F(WatchedAllocationsTest, NothingIsNamedBeforeAnAnswerWithAnIncarnation) {
  WatchedAllocations fresh;
  EXPECT_TRUE(fresh.known(everything).empty());
  EXPECT_EQ(fresh.index(), 0u);
  // A control plane without deltas (no incarnation) sends everything in full: naming is pointless.
  auto taken = fresh.take({.index = 5, .changed = {alloc("a1", 3)}}, {});
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->all.size(), 1u);
  EXPECT_TRUE(fresh.known(everything).empty());
  EXPECT_EQ(fresh.index(), 5u);
}

TEST_F(WatchedAllocationsTest, UnchangedOnesAreCompletedFromTheBodiesHeldAndUnlistedOnesDropped) {
  auto taken = watched.take({.index = 12, .incarnation = 9, .changed = {alloc("a2", 12), alloc("a3", 11)},
                             .unchanged = {{"a1", 3}}},
                            watched.known(everything));
  ASSERT_TRUE(taken) << taken.error();
  ASSERT_EQ(taken->all.size(), 3u);
  EXPECT_EQ(taken->all.at("a1")->name, "first");
  EXPECT_EQ(taken->all.at("a1")->modify_index, 3u);
  EXPECT_EQ(taken->all.at("a2")->modify_index, 12u);
  EXPECT_EQ(taken->unchanged, (std::set<std::string>{"a1"}));
  EXPECT_EQ(watched.index(), 12u);
  EXPECT_EQ(watched.known(everything), (Known{{"a1", 3}, {"a2", 12}, {"a3", 11}}));
  // Not listed any more: gone from what is held (and from the next request).
  taken = watched.take({.index = 13, .incarnation = 9, .unchanged = {{"a3", 11}}}, watched.known(everything));
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_EQ(taken->all.size(), 1u);
  EXPECT_EQ(watched.known(everything), (Known{{"a3", 11}}));
}

TEST_F(WatchedAllocationsTest, ABodyInFullWinsOverAnUnchangedEntryForTheSameId) {
  auto taken = watched.take({.index = 11, .incarnation = 9, .changed = {alloc("a1", 3, "second")},
                             .unchanged = {{"a1", 3}, {"a2", 4}}},
                            watched.known(everything));
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_EQ(taken->all.at("a1")->name, "second");
  EXPECT_EQ(taken->unchanged, (std::set<std::string>{"a2"}));
}

TEST_F(WatchedAllocationsTest, UnchangedFromAnotherIncarnationIsRefusedAndEverythingForgotten) {
  auto taken = watched.take({.index = 11, .incarnation = 8, .unchanged = {{"a1", 3}, {"a2", 4}}},
                            watched.known(everything));
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("another incarnation"), std::string::npos) << taken.error();
  expect_forgotten();
}

TEST_F(WatchedAllocationsTest, AnotherIncarnationInFullReplacesEverything) {
  auto taken = watched.take({.index = 2, .incarnation = 8, .changed = {alloc("a1", 2, "restored")}},
                            watched.known(everything));
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_EQ(taken->all.at("a1")->name, "restored");
  EXPECT_TRUE(taken->unchanged.empty());
  EXPECT_EQ(watched.incarnation(), 8u);
  EXPECT_EQ(watched.index(), 2u);
  EXPECT_EQ(watched.known(everything), (Known{{"a1", 2}}));
}

TEST_F(WatchedAllocationsTest, UnchangedWithAnIndexGoingBackwardsIsRefused) {
  auto taken = watched.take({.index = 7, .incarnation = 9, .unchanged = {{"a1", 3}, {"a2", 4}}},
                            watched.known(everything));
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("backwards"), std::string::npos) << taken.error();
  expect_forgotten();
}

TEST_F(WatchedAllocationsTest, UnchangedAtAnotherModifyIndexIsRefused) {
  auto taken = watched.take({.index = 11, .incarnation = 9, .unchanged = {{"a1", 2}, {"a2", 4}}},
                            watched.known(everything));
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("\"a1\""), std::string::npos) << taken.error();
  expect_forgotten();
}

TEST_F(WatchedAllocationsTest, UnchangedNeverHeldIsRefused) {
  auto taken = watched.take({.index = 11, .incarnation = 9, .unchanged = {{"a9", 3}}}, watched.known(everything));
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("\"a9\""), std::string::npos) << taken.error();
  expect_forgotten();
}

// An allocation the caller wants in full (a restored one waiting for its SecretEnv) is not named,
// and an answer that names it unchanged anyway is refused: its body must come.
TEST_F(WatchedAllocationsTest, WhatTheCallerWantsInFullIsNotNamedNorTakenAsUnchanged) {
  const auto asked = watched.known([](const std::string& id) { return id == "a1"; });
  EXPECT_EQ(asked, (Known{{"a2", 4}}));
  auto taken = watched.take({.index = 11, .incarnation = 9, .unchanged = {{"a1", 3}, {"a2", 4}}}, asked);
  ASSERT_FALSE(taken);
  expect_forgotten();
}

}  // namespace
}  // namespace mooring::nodeagent
