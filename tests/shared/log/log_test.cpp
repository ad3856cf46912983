#include "shared/log/log.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace mooring::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { configure(Level::info, Format::text, nullptr); }
  std::ostringstream out_;
};

TEST_F(LogTest, TextLineCarriesComponentMessageAndFields) {
  configure(Level::debug, Format::text, &out_);
  Logger("supervisor").info("plugin became healthy", {{"plugin_id", "hostpath"}, {"attempt", 3}, {"ok", true}});
  const std::string line = out_.str();
  EXPECT_NE(line.find("level=info"), std::string::npos);
  EXPECT_NE(line.find("component=supervisor"), std::string::npos);
  EXPECT_NE(line.find("msg=\"plugin became healthy\""), std::string::npos);
  EXPECT_NE(line.find("plugin_id=hostpath"), std::string::npos);
  EXPECT_NE(line.find("attempt=3"), std::string::npos);
  EXPECT_NE(line.find("ok=true"), std::string::npos);
  EXPECT_EQ(line.back(), '\n');
}

TEST_F(LogTest, ValuesWithSpacesAreQuotedAndEscaped) {
  configure(Level::debug, Format::text, &out_);
  Logger("x").warn("m", {{"error", "deadline \"exceeded\" now"}});
  EXPECT_NE(out_.str().find(R"(error="deadline \"exceeded\" now")"), std::string::npos);
}

TEST_F(LogTest, SecretKeysAreRedactedInTextAndJson) {
  for (Format f : {Format::text, Format::json}) {
    out_.str("");
    configure(Level::debug, f, &out_);
    Logger("x").info("claim", {{"secrets", "hunter2"}, {"api_token", "abc"}, {"volume_id", "vol-1"}});
    const std::string line = out_.str();
    EXPECT_EQ(line.find("hunter2"), std::string::npos) << line;
    EXPECT_EQ(line.find("abc"), std::string::npos) << line;
    EXPECT_NE(line.find("vol-1"), std::string::npos) << line;
    EXPECT_NE(line.find("[REDACTED]"), std::string::npos) << line;
  }
}

TEST_F(LogTest, SecretWrapperAndMapsNeverPrintValues) {
  configure(Level::debug, Format::text, &out_);
  std::map<std::string, std::string> m{{"user", "admin"}, {"pass", "s3cr3t"}};
  Logger("x").info("m", {{"value", Secret{"s3cr3t"}}, {"context", m}});
  const std::string line = out_.str();
  EXPECT_EQ(line.find("s3cr3t"), std::string::npos) << line;
  EXPECT_EQ(line.find("admin"), std::string::npos) << line;
  EXPECT_NE(line.find("user=[REDACTED]"), std::string::npos) << line;
}

TEST_F(LogTest, JsonLineIsOneObjectWithEscapes) {
  configure(Level::debug, Format::json, &out_);
  Logger("http").error("bad \"input\"", {{"path", "/v1/x\n"}, {"n", 7}});
  const std::string line = out_.str();
  EXPECT_EQ(line.front(), '{');
  EXPECT_NE(line.find(R"("msg":"bad \"input\"")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("path":"/v1/x\n")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("n":"7")"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST_F(LogTest, LevelFiltersLowerEvents) {
  configure(Level::warn, Format::text, &out_);
  Logger l("x");
  l.info("hidden");
  l.debug("hidden");
  l.warn("shown");
  EXPECT_EQ(out_.str().find("hidden"), std::string::npos);
  EXPECT_NE(out_.str().find("shown"), std::string::npos);
}

TEST(LogParse, LevelsAndFormats) {
  Level l{};
  Format f{};
  EXPECT_TRUE(parse_level("DEBUG", l));
  EXPECT_EQ(l, Level::debug);
  EXPECT_TRUE(parse_level("warning", l));
  EXPECT_EQ(l, Level::warn);
  EXPECT_FALSE(parse_level("loud", l));
  EXPECT_TRUE(parse_format("json", f));
  EXPECT_EQ(f, Format::json);
  EXPECT_FALSE(parse_format("xml", f));
}

TEST(LogSecretKeys, RecognisesCredentialNames) {
  EXPECT_TRUE(is_secret_key("Secrets"));
  EXPECT_TRUE(is_secret_key("X-Mooring-CSI-Secrets"));
  EXPECT_TRUE(is_secret_key("password"));
  EXPECT_TRUE(is_secret_key("mount_flags"));
  EXPECT_FALSE(is_secret_key("volume_id"));
  EXPECT_FALSE(is_secret_key("plugin_id"));
}

}  // namespace
}  // namespace mooring::log
