// Argument parsing: global flags anywhere, command flags, usage errors and help targets.
#include <gtest/gtest.h>

#include "cli/args.hpp"
#include "cli/commands.hpp"

namespace mooring::cli {
namespace {

std::vector<CommandSpec> table() {
  return {
      {.words = {"volume", "status"}, .arguments = "[ID]", .min_args = 0, .max_args = 1,
       .flags = {{"plugin", true, "ID", "only this plugin"}}, .summary = "status"},
      {.words = {"volume", "deregister"}, .arguments = "ID", .min_args = 1, .max_args = 1,
       .flags = {{"force", false, "", "force"}}, .summary = "deregister"},
      {.words = {"volume", "snapshot", "create"}, .arguments = "VOLUME NAME", .min_args = 2, .max_args = 2,
       .summary = "snap"},
      {.words = {"events"}, .arguments = "", .min_args = 0, .max_args = 0,
       .flags = {{"wait", true, "DURATION", "wait"}}, .summary = "events"},
  };
}

ParseResult parse(std::vector<std::string> argv) {
  static const auto commands = table();
  return parse_command_line(argv, commands);
}

TEST(CliArgs, GlobalFlagsBeforeTheCommandAndAfterIt) {
  auto r = parse({"-json", "volume", "status", "-address", "http://h:1", "vol-1"});
  ASSERT_EQ(r.error, "");
  ASSERT_NE(r.invocation.command, nullptr);
  EXPECT_EQ(r.invocation.command->summary, "status");
  EXPECT_TRUE(r.invocation.globals.json);
  EXPECT_EQ(r.invocation.globals.address, "http://h:1");
  EXPECT_EQ(r.invocation.args, std::vector<std::string>{"vol-1"});
}

TEST(CliArgs, FlagsBetweenCommandWordsAreAccepted) {
  auto r = parse({"volume", "-json", "snapshot", "create", "v", "n"});
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.invocation.globals.json);
  EXPECT_EQ(r.invocation.args, (std::vector<std::string>{"v", "n"}));
}

TEST(CliArgs, EqualsFormDoubleDashAndSwitchValues) {
  auto r = parse({"--address=http://x:2", "volume", "deregister", "--force", "v", "-json=false"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.invocation.globals.address, "http://x:2");
  EXPECT_FALSE(r.invocation.globals.json);
  EXPECT_EQ(r.invocation.flag("force"), "true");
  auto off = parse({"volume", "deregister", "-force=false", "v"});
  ASSERT_EQ(off.error, "");
  EXPECT_EQ(off.invocation.flag("force"), "false");
  EXPECT_FALSE(off.invocation.enabled("force"));
  EXPECT_TRUE(r.invocation.enabled("force"));
  EXPECT_NE(parse({"volume", "deregister", "-force=maybe", "v"}).error, "");
  // The services' spellings (shared/config parse_bool): 1/0, on/off, yes/no.
  EXPECT_EQ(parse({"volume", "deregister", "-force=on", "v"}).invocation.flag("force"), "true");
  EXPECT_EQ(parse({"volume", "deregister", "-force=0", "v"}).invocation.flag("force"), "false");
  EXPECT_TRUE(parse({"-json=1", "volume", "status", "v"}).invocation.globals.json);
  EXPECT_FALSE(parse({"-json=off", "volume", "status", "v"}).invocation.globals.json);
}

TEST(CliArgs, CommandFlagWithValue) {
  auto r = parse({"volume", "status", "-plugin", "hostpath"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.invocation.flag("plugin"), "hostpath");
  EXPECT_TRUE(r.invocation.args.empty());
  auto missing = parse({"volume", "status", "-plugin"});
  EXPECT_NE(missing.error.find("-plugin needs a value"), std::string::npos) << missing.error;
}

TEST(CliArgs, DoubleDashEndsFlagsSoIdsMayStartWithADash) {
  auto r = parse({"volume", "status", "--", "-odd-id"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.invocation.args, std::vector<std::string>{"-odd-id"});
}

TEST(CliArgs, CommandFlagsBelongToTheirCommandOnly) {
  auto r = parse({"volume", "status", "-force"});
  EXPECT_EQ(r.error, "unknown flag -force");
  EXPECT_EQ(r.help_words, (std::vector<std::string>{"volume", "status"}));
  // Before the command is known, a command flag is unknown too.
  EXPECT_EQ(parse({"-force", "volume", "deregister", "v"}).error, "unknown flag -force");
}

TEST(CliArgs, UsageErrorsNameTheProblemAndWhoseUsageToShow) {
  EXPECT_EQ(parse({}).error, "no command given");
  auto unknown = parse({"volumes"});
  EXPECT_EQ(unknown.error, "unknown command \"volumes\"");
  EXPECT_TRUE(unknown.help_words.empty());
  auto sub = parse({"volume", "frobnicate"});
  EXPECT_EQ(sub.error, "unknown command \"volume frobnicate\"");
  EXPECT_EQ(sub.help_words, std::vector<std::string>{"volume"});
  auto group = parse({"volume", "snapshot"});
  EXPECT_EQ(group.error, "\"volume snapshot\" needs a subcommand");
  EXPECT_EQ(group.help_words, (std::vector<std::string>{"volume", "snapshot"}));
  auto few = parse({"volume", "snapshot", "create", "v"});
  EXPECT_EQ(few.error, "volume snapshot create: missing arguments (expected VOLUME NAME)");
  auto many = parse({"volume", "deregister", "a", "b"});
  EXPECT_EQ(many.error, "volume deregister: too many arguments (expected ID)");
  auto none = parse({"events", "x"});
  EXPECT_EQ(none.error, "events: takes no arguments, got \"x\"");
}

TEST(CliArgs, HelpAtAnyLevel) {
  auto top = parse({"-h"});
  EXPECT_TRUE(top.help);
  EXPECT_TRUE(top.help_words.empty());
  auto group = parse({"volume", "--help"});
  EXPECT_TRUE(group.help);
  EXPECT_EQ(group.help_words, std::vector<std::string>{"volume"});
  // -h wins over a missing argument: the user is asking how to call it.
  auto cmd = parse({"volume", "deregister", "-h"});
  EXPECT_TRUE(cmd.help);
  EXPECT_EQ(cmd.help_words, (std::vector<std::string>{"volume", "deregister"}));
}

TEST(CliArgs, UsageListsCommandsOfAGroupAndFlagsOfACommand) {
  auto commands = table();
  auto group = usage_for({"volume"}, commands);
  EXPECT_NE(group.find("volume status [ID]"), std::string::npos) << group;
  EXPECT_NE(group.find("volume snapshot create VOLUME NAME"), std::string::npos);
  EXPECT_EQ(group.find("events"), std::string::npos);
  auto cmd = usage_for({"volume", "status"}, commands);
  EXPECT_NE(cmd.find("usage: mooring volume status [flags] [ID]"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("-plugin ID"), std::string::npos);
  EXPECT_NE(cmd.find("-address URL"), std::string::npos);
}

TEST(CliArgs, SecretsParse) {
  std::map<std::string, std::string> out;
  std::string err;
  ASSERT_TRUE(parse_secrets("a=1,b=x=y,,", out, err));
  EXPECT_EQ(out, (std::map<std::string, std::string>{{"a", "1"}, {"b", "x=y"}}));
  out.clear();
  EXPECT_TRUE(parse_secrets("", out, err));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(parse_secrets("a=1,topsecret", out, err));
  // The message never repeats what was given: it may be a secret.
  EXPECT_EQ(err.find("topsecret"), std::string::npos);
  EXPECT_FALSE(parse_secrets("=v", out, err));
}

TEST(CliArgs, RealCommandTableHasNoAmbiguousOrDuplicateCommands) {
  const auto& all = all_commands();
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(all[i].run) << all[i].summary;
    EXPECT_LE(all[i].min_args, all[i].max_args);
    for (std::size_t j = 0; j < all.size(); ++j) {
      if (i == j) continue;
      EXPECT_NE(all[i].words, all[j].words);
      // A command's words must not be a prefix of another's: it could never be reached.
      bool prefix = all[j].words.size() > all[i].words.size() &&
                    std::equal(all[i].words.begin(), all[i].words.end(), all[j].words.begin());
      EXPECT_FALSE(prefix) << all[i].summary << " shadows " << all[j].summary;
    }
  }
  for (std::vector<std::string> words :
       {std::vector<std::string>{"volume", "register"}, {"volume", "status"}, {"volume", "detach"}, {"volume", "create"},
        {"volume", "delete"}, {"volume", "deregister"}, {"volume", "expand"}, {"volume", "snapshot", "create"},
        {"volume", "snapshot", "list"}, {"volume", "snapshot", "delete"}, {"volume", "group-snapshot", "create"},
        {"volume", "group-snapshot", "list"}, {"volume", "group-snapshot", "delete"}, {"plugin", "status"}, {"node", "status"},
        {"alloc", "run"}, {"alloc", "stop"}, {"alloc", "status"}, {"events"}}) {
    bool found = std::any_of(all.begin(), all.end(), [&](const CommandSpec& c) { return c.words == words; });
    EXPECT_TRUE(found) << words[0] << " " << words[1 % words.size()];
  }
}

}  // namespace
}  // namespace mooring::cli
