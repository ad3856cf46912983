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
