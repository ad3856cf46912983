// "Is the volume still published to this node?" as the plugin tells it: which query is asked
// (capabilities), pages of ListVolumes, and what "cannot tell" and "not reached" look like.
#include "shared/csi/published_check.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/shared/async/run_coro.hpp"

namespace mooring::csi {
namespace {

namespace asio = boost::asio;
using GetAnswer = QueryAnswer<::csi::v1::ControllerGetVolumeResponse>;
using ListAnswer = QueryAnswer<::csi::v1::ListVolumesResponse>;

GetAnswer get_with(std::vector<std::string> nodes) {
  GetAnswer a{.ok = true};
  for (auto& n : nodes) a.response.mutable_status()->add_published_node_ids(n);
  return a;
}

ListAnswer page(std::vector<std::pair<std::string, std::vector<std::string>>> volumes, std::string next) {
  ListAnswer a{.ok = true};
  for (auto& [id, nodes] : volumes) {
    auto* e = a.response.add_entries();
    e->mutable_volume()->set_volume_id(id);
    for (auto& n : nodes) e->mutable_status()->add_published_node_ids(n);
  }
  a.response.set_next_token(next);
  return a;
}

// Runs the check with scripted answers; counts the queries.
struct Plugin {
  std::vector<GetAnswer> gets;
  std::vector<ListAnswer> pages;
  int get_calls = 0, list_calls = 0;
  std::vector<std::string> tokens;

  PublishedCheck check(bool can_get, bool can_list) {
    asio::io_context io;
    PublishedCheck out;
    async::run_coro(io, [&]() -> asio::awaitable<void> {
      auto get = [&]() -> asio::awaitable<GetAnswer> { co_return gets.at(static_cast<std::size_t>(get_calls++)); };
      auto list = [&](std::string token) -> asio::awaitable<ListAnswer> {
        tokens.push_back(token);
        co_return pages.at(static_cast<std::size_t>(list_calls++));
      };
      out = co_await published_to_node(can_get, can_list, "ext-1", "csi-node-1", get, list);
    }());
    return out;
  }
};

TEST(PublishedCheck, ControllerGetVolumeTellsPublishedOrNot) {
  Plugin yes{.gets = {get_with({"csi-node-2", "csi-node-1"})}};
  EXPECT_EQ(yes.check(true, true).published, true);
  EXPECT_EQ(yes.list_calls, 0);  // GetVolume answered: ListVolumes is not asked
  Plugin no{.gets = {get_with({"csi-node-2"})}};
  EXPECT_EQ(no.check(true, false).published, false);
}

TEST(PublishedCheck, ListVolumesIsPagedUntilTheVolumeIsFound) {
  Plugin p{.pages = {page({{"ext-0", {"csi-node-1"}}}, "t1"), page({{"ext-1", {}}}, "t2")}};
  EXPECT_EQ(p.check(false, true).published, false);
  EXPECT_EQ(p.tokens, (std::vector<std::string>{"", "t1"}));
}

TEST(PublishedCheck, WithoutTheCapabilityOrAnAnswerThePluginCannotTell) {
  Plugin none;
  auto check = none.check(false, false);
  EXPECT_FALSE(check.published);
  EXPECT_TRUE(check.unreachable.empty());
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("LIST_VOLUMES_PUBLISHED_NODES"), std::string::npos);
  // GetVolume fails (not reached is something else), ListVolumes does not list the volume.
  Plugin unlisted{.gets = {GetAnswer{.ok = false, .error = "UNIMPLEMENTED"}}, .pages = {page({{"ext-9", {}}}, "")}};
  auto told = unlisted.check(true, true);
  EXPECT_FALSE(told.published);
  EXPECT_EQ(told.notes.size(), 1u);
}

TEST(PublishedCheck, AQueryNotReachedEndsTheCheckWithoutAnAnswer) {
  Plugin down{.gets = {GetAnswer{.unreachable = true, .error = "no controller"}}};
  auto check = down.check(true, true);
  EXPECT_FALSE(check.published);
  EXPECT_EQ(check.unreachable, "no controller");
  EXPECT_EQ(down.list_calls, 0);
}

}  // namespace
}  // namespace mooring::csi
