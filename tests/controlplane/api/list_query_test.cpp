#include "services/controlplane/api/list_query.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::api {

namespace {
std::map<std::string, int> items() { return {{"a-1", 1}, {"a-2", 2}, {"a-3", 3}, {"b-1", 4}}; }
auto all = [](int) { return true; };
}  // namespace

TEST(ListQuery, ParsesAndValidatesParameters) {
  auto q = parse_list_query({{"prefix", "a"}, {"per_page", "10"}, {"next_token", "a-2"}});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->prefix, "a");
  EXPECT_EQ(q->per_page, 10u);
  EXPECT_EQ(q->next_token, "a-2");
  for (const char* bad : {"0", "-1", "x", "10x", "1001"}) {
    auto r = parse_list_query({{"per_page", bad}});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("per_page"), std::string::npos);
  }
}

TEST(Paginate, PrefixAndPagesWithNextToken) {
  auto m = items();
  auto p1 = paginate(m, ListQuery{"a-", 2, ""}, all);
  ASSERT_EQ(p1.items.size(), 2u);
  EXPECT_EQ(*p1.items[0], 1);
  EXPECT_EQ(p1.next_token, "a-3");
  auto p2 = paginate(m, ListQuery{"a-", 2, p1.next_token}, all);
  ASSERT_EQ(p2.items.size(), 1u);
  EXPECT_EQ(*p2.items[0], 3);
  EXPECT_EQ(p2.next_token, "");
}

TEST(Paginate, NoPagingReturnsEverythingAndFiltersApply) {
  auto m = items();
  EXPECT_EQ(paginate(m, ListQuery{}, all).items.size(), 4u);
  auto odd = paginate(m, ListQuery{}, [](int v) { return v % 2 == 1; });
  EXPECT_EQ(odd.items.size(), 2u);
  // The token of a filtered page is the next *matching* item.
  auto page = paginate(m, ListQuery{"", 1, ""}, [](int v) { return v % 2 == 1; });
  EXPECT_EQ(page.next_token, "a-3");
}

TEST(Paginate, TokenOfADeletedItemStartsAtTheNextOne) {
  auto m = items();
  m.erase("a-3");
  auto p = paginate(m, ListQuery{"", 10, "a-3"}, all);
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(*p.items[0], 4);
}

}  // namespace mooring::controlplane::api
