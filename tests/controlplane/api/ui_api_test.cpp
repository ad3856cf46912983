// The dashboard's files and the API's contract as the control plane serves them: from the binary,
// with their content types (the files with a strict CSP), to anyone (they hold no data) even with
// ACLs on; nothing else.
#include <gtest/gtest.h>

#include "services/controlplane/api/openapi_document.hpp"
#include "services/controlplane/ui/assets.hpp"
#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane {

class UiApiTest : public ::testing::Test {
 protected:
  void SetUp() override { server.start(); }
  ApiServer server{api::ApiOptions{.acl = true}};  // no token: the files are served all the same
};

TEST_F(UiApiTest, EveryEmbeddedFileIsServedWithItsTypeAndACsp) {
  ASSERT_FALSE(ui::embedded_files().empty());
  for (const auto& f : ui::embedded_files()) {
    auto r = http_request(server.port, "GET", "/ui/" + std::string(f.path));
    ASSERT_EQ(r.status, 200u) << f.path;
    EXPECT_EQ(r.body, f.body) << f.path;
    EXPECT_NE(r.header("content-type"), "application/octet-stream") << f.path;
    EXPECT_NE(r.header("content-security-policy").find("default-src 'none'"), std::string::npos) << f.path;
    EXPECT_EQ(r.header("content-security-policy").find("unsafe-inline"), std::string::npos) << f.path;
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
    EXPECT_TRUE(r.header("access-control-allow-origin").empty());
  }
  auto index = http_request(server.port, "GET", "/ui/");
  ASSERT_EQ(index.status, 200u);
  EXPECT_EQ(index.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(http_request(server.port, "GET", "/ui/app.js").header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(http_request(server.port, "GET", "/ui/style.css").header("content-type"), "text/css; charset=utf-8");
}

// The API's contract is public as the dashboard's files are: no token even with ACLs on; a
// write to it is no route.
TEST_F(UiApiTest, TheApiContractIsServedToAnyoneAsJson) {
  auto r = http_request(server.port, "GET", "/v1/openapi.json");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, api::openapi_document());
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
  EXPECT_NE(r.body.find("\"openapi\":\"3.1.0\""), std::string::npos);
  EXPECT_EQ(http_request(server.port, "PUT", "/v1/openapi.json", "{}").status, 405u);
}

TEST_F(UiApiTest, RootAndUiWithoutSlashRedirectAndUnknownFilesAre404) {
  for (const char* path : {"/", "/ui"}) {
    auto r = http_request(server.port, "GET", path);
    EXPECT_EQ(r.status, 301u) << path;
    EXPECT_EQ(r.header("location"), "/ui/") << path;
  }
  auto missing = http_request(server.port, "GET", "/ui/nope.js");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_NE(missing.body.find("no such dashboard file: nope.js"), std::string::npos) << missing.body;
  EXPECT_EQ(http_request(server.port, "GET", "/ui/..%2Fapi.hpp").status, 404u);
  EXPECT_EQ(http_request(server.port, "POST", "/ui/app.js").status, 405u);
  // The API itself still wants a token.
  EXPECT_EQ(http_request(server.port, "GET", "/v1/volumes").status, 401u);
}

}  // namespace mooring::controlplane
