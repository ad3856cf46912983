#include "services/controlplane/http/cors.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::http {

namespace {

Request browser(std::string method, std::string origin) {
  Request r;
  r.method = std::move(method);
  r.headers["origin"] = std::move(origin);
  return r;
}

std::string header(const Response& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

}  // namespace

TEST(Cors, NoForeignOriginMayReadByDefault) {
  CorsPolicy p;
  Response r;
  apply_cors(p, browser("GET", "https://dash.example"), r);
  EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "");
  auto pre = cors_preflight(p, browser("OPTIONS", "https://dash.example"), "GET, OPTIONS");
  EXPECT_EQ(header(pre, "Access-Control-Allow-Origin"), "");
  p.read_origins = {"*"};
  Response open;
  apply_cors(p, browser("GET", "https://dash.example"), open);
  EXPECT_EQ(header(open, "Access-Control-Allow-Origin"), "*");
  EXPECT_NE(header(open, "Access-Control-Expose-Headers").find("X-Nomad-Index"), std::string::npos);
}

TEST(Cors, WritesFromUnlistedBrowserOriginsAreForbidden) {
  CorsPolicy p;
  EXPECT_TRUE(cors_write_forbidden(p, browser("PUT", "https://evil.example")));
  EXPECT_FALSE(cors_write_forbidden(p, browser("GET", "https://evil.example")));
  Request curl;
  curl.method = "PUT";  // no Origin: not a browser
  EXPECT_FALSE(cors_write_forbidden(p, curl));
  p.write_origins = {"https://dash.example"};
  EXPECT_FALSE(cors_write_forbidden(p, browser("PUT", "https://dash.example")));
}

TEST(Cors, TheServersOwnDashboardMayWriteWhenReachedByAddressOnly) {
  CorsPolicy p;
  auto own = [](std::string origin, std::string host, bool secure = false) {
    auto r = browser("POST", std::move(origin));
    r.headers["host"] = std::move(host);
    r.secure = secure;
    return r;
  };
  EXPECT_FALSE(cors_write_forbidden(p, own("http://127.0.0.1:4700", "127.0.0.1:4700")));
  EXPECT_FALSE(cors_write_forbidden(p, own("https://[::1]:4700", "[::1]:4700", true)));
  EXPECT_FALSE(cors_write_forbidden(p, own("http://localhost:4700", "localhost:4700")));
  // An absent port is the scheme's default.
  EXPECT_FALSE(cors_write_forbidden(p, own("https://127.0.0.1", "127.0.0.1:443", true)));
  EXPECT_FALSE(cors_write_forbidden(p, own("http://127.0.0.1:80", "127.0.0.1")));
  // Another scheme, port or host is another origin: a plain-HTTP page is not the HTTPS port's.
  EXPECT_TRUE(cors_write_forbidden(p, own("http://127.0.0.1:4700", "127.0.0.1:4700", true)));
  EXPECT_TRUE(cors_write_forbidden(p, own("https://127.0.0.1:4700", "127.0.0.1:4700")));
  EXPECT_TRUE(cors_write_forbidden(p, own("https://127.0.0.1", "127.0.0.1:4700", true)));
  EXPECT_TRUE(cors_write_forbidden(p, own("http://127.0.0.1:8080", "127.0.0.1:4700")));
  EXPECT_TRUE(cors_write_forbidden(p, own("http://127.0.0.1:4700/x", "127.0.0.1:4700")));
  EXPECT_TRUE(cors_write_forbidden(p, own("null", "127.0.0.1:4700")));
  // A name could be rebound to this address by its DNS (DNS rebinding): it must be listed.
  EXPECT_TRUE(cors_write_forbidden(p, own("http://evil.example:4700", "evil.example:4700")));
  EXPECT_TRUE(cors_write_forbidden(p, own("http://1.2.3.4.evil.example:4700", "1.2.3.4.evil.example:4700")));
  p.write_origins = {"https://mooring.example"};
  EXPECT_FALSE(cors_write_forbidden(p, own("https://mooring.example", "mooring.example")));
}

TEST(Cors, PreflightOffersOnlyWhatTheOriginMayDo) {
  CorsPolicy p;
  p.read_origins = {"*"};
  p.write_origins = {"https://dash.example"};
  auto reader = cors_preflight(p, browser("OPTIONS", "https://other.example"), "GET, PUT, DELETE, OPTIONS");
  EXPECT_EQ(reader.status, 204u);
  EXPECT_EQ(header(reader, "Access-Control-Allow-Methods"), "GET, OPTIONS");
  auto writer = cors_preflight(p, browser("OPTIONS", "https://dash.example"), "GET, PUT, DELETE, OPTIONS");
  EXPECT_EQ(header(writer, "Access-Control-Allow-Methods"), "GET, PUT, DELETE, OPTIONS");
  EXPECT_EQ(header(writer, "Access-Control-Allow-Origin"), "https://dash.example");
  EXPECT_EQ(header(writer, "Vary"), "Origin");
}

TEST(Cors, PreflightWithoutOriginOnlyListsAllow) {
  Request r;
  r.method = "OPTIONS";
  auto res = cors_preflight(CorsPolicy{}, r, "GET, OPTIONS");
  EXPECT_EQ(header(res, "Allow"), "GET, OPTIONS");
  EXPECT_EQ(header(res, "Access-Control-Allow-Origin"), "");
}

}  // namespace mooring::controlplane::http
