#include "services/controlplane/http/router.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::http {

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/v1/volumes", 1);
    router.add("GET", "/v1/volume/csi/:id", 2);
    router.add("PUT", "/v1/volume/csi/:id", 3);
    router.add("DELETE", "/v1/volume/csi/:id", 4);
    router.add("PUT", "/v1/volume/csi/:id/create", 5);
    router.add("POST", "/v1/allocation/:id/stop", 6);
  }
  Router<int> router;
};

TEST_F(RouterTest, MatchesLiteralAndParameterisedPaths) {
  auto m = router.match("GET", "/v1/volumes");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, 1);
  m = router.match("PUT", "/v1/volume/csi/db-1/create");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, 5);
  EXPECT_EQ(m.params.at("id"), "db-1");
}

TEST_F(RouterTest, TrailingSlashIsIgnored) {
  auto m = router.match("GET", "/v1/volumes/");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, 1);
}

TEST_F(RouterTest, HeadFallsBackToGet) {
  auto m = router.match("HEAD", "/v1/volume/csi/x");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, 2);
}

TEST_F(RouterTest, WrongMethodReportsAllowList) {
  auto m = router.match("POST", "/v1/volume/csi/x");
  EXPECT_FALSE(m.target);
  EXPECT_TRUE(m.path_known);
  EXPECT_EQ(m.allow, "GET, PUT, DELETE, OPTIONS");
}

TEST_F(RouterTest, UnknownPathIsNotKnown) {
  auto m = router.match("GET", "/v1/nothing");
  EXPECT_FALSE(m.target);
  EXPECT_FALSE(m.path_known);
}

TEST_F(RouterTest, ParametersAreDecodedAfterSplitting) {
  auto m = router.match("GET", "/v1/volume/csi/..%2F..%2Fetc");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(m.params.at("id"), "../../etc");  // the API's id validation rejects it
  m = router.match("GET", "/v1/volume/csi/%zz");
  EXPECT_TRUE(m.bad_encoding);
}

TEST_F(RouterTest, EmptySegmentNeverMatchesAParameter) {
  auto m = router.match("PUT", "/v1/volume/csi//create");
  EXPECT_FALSE(m.target);
}

TEST(SplitPath, KeepsInnerEmptySegments) {
  EXPECT_EQ(split_path("/a//b/").size(), 3u);
  EXPECT_EQ(split_path("/").size(), 0u);
}

}  // namespace mooring::controlplane::http
