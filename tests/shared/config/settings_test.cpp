#include "shared/config/settings.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::config {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message;
  }
  return "(no error)";
}

TEST(Settings, SplitFlagsTakesBothSpellingsAndNamesWhatIsMissing) {
  const auto flags = split_flags({"bin", "--a", "1", "--b=x=y", "--c="});
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_EQ(flags[0].name, "a");
  EXPECT_EQ(flags[0].value, "1");
  EXPECT_EQ(flags[1].name, "b");
  EXPECT_EQ(flags[1].value, "x=y");
  EXPECT_EQ(flags[2].value, "");
  EXPECT_EQ(error_of([] { split_flags({"bin", "--a"}); }), "flag --a needs a value");
  EXPECT_EQ(error_of([] { split_flags({"bin", "stray"}); }), "unexpected argument \"stray\" (see --help)");
  EXPECT_TRUE(wants_help({"bin", "--bogus", "-h"}));
  EXPECT_FALSE(wants_help({"bin", "--a", "1"}));
}

TEST(Settings, ReadFileNamesTheFileInEveryError) {
  test::TempDir dir;
  const auto path = (dir.path() / "c.json").string();
  EXPECT_EQ(error_of([&] { read_file(path); }), "config file \"" + path + "\": cannot be read");
  test::write_file(path, "[1]");
  EXPECT_EQ(error_of([&] { read_file(path); }), "config file \"" + path + "\": expected a JSON object");
  test::write_file(path, "{nope");
  EXPECT_NE(error_of([&] { read_file(path); }).find("config file \"" + path + "\": invalid JSON"), std::string::npos);
  test::write_file(path, R"({"k": "v"})");
  EXPECT_EQ(read_file(path).at("k"), "v");
}

// The README's spellings (MOORING_INSECURE=1, --metrics=off) and yes/no, in any case; nothing else.
TEST(Settings, BooleansAcceptEverySpellingTheDocsUseAndNothingElse) {
  for (const char* t : {"true", "1", "on", "yes", "TRUE", "On", "Yes"}) EXPECT_EQ(parse_bool(t), true) << t;
  for (const char* f : {"false", "0", "off", "no", "FALSE", "Off", "NO"}) EXPECT_EQ(parse_bool(f), false) << f;
  for (const char* bad : {"", "2", "y", "n", "enable", "truee", " true", "-1"}) EXPECT_EQ(parse_bool(bad), std::nullopt) << bad;
  EXPECT_TRUE(json_bool(nlohmann::json(true), "x"));
  EXPECT_FALSE(json_bool(nlohmann::json("off"), "x"));
  EXPECT_EQ(error_of([] { json_bool(nlohmann::json("maybe"), "environment: insecure"); }),
            "environment: insecure: expected true or false (1/0, on/off, yes/no), got \"maybe\"");
  EXPECT_EQ(error_of([] { json_bool(nlohmann::json(1), "config file \"a.json\": metrics"); }),
            "config file \"a.json\": metrics: expected true or false (1/0, on/off, yes/no), got 1");
}

TEST(Settings, HelpListsFlagEnvKeyAndDefault) {
  const auto text = help_text("Usage: x\n", {Doc{"data-dir", "X_DATA_DIR", "data_dir", "DIR", "where", "/var/x"},
                                             Doc{"config", "X_CONFIG", "", "FILE", "the file", ""}});
  EXPECT_EQ(text,
            "Usage: x\n\n"
            "  --data-dir DIR\n      where\n      env X_DATA_DIR, file key \"data_dir\", default /var/x\n"
            "  --config FILE\n      the file\n      env X_CONFIG\n"
            "  -h, --help\n      this text\n");
}

}  // namespace
}  // namespace mooring::config
