#include "services/nodeagent/config/agent_config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "services/nodeagent/config/node_identity.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mooring-agent-config-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name) << content;
    return path_ / name;
  }

 private:
  fs::path path_;
};

ParsedArgs ok(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
  auto r = parse_agent_config(argv, env);
  if (auto* e = std::get_if<ConfigError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<ParsedArgs>(r);
}

std::string err(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
  auto r = parse_agent_config(argv, env);
  if (auto* e = std::get_if<ConfigError>(&r)) return e->message;
  ADD_FAILURE() << "expected an error";
  return {};
}

// Every boolean accepts the spellings docs/configuration.md gives from flags, the environment and the file:
// `MOORING_INSECURE=1 make run` used to stop the agent with 'expected true or false, got "1"'.
TEST(AgentConfig, BooleansAcceptOneZeroOnOffTrueFalseFromEverySource) {
  const TempDir dir;
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{
           {"1", true}, {"0", false}, {"on", true}, {"off", false}, {"true", true}, {"false", false}, {"yes", true}}) {
    EXPECT_EQ(ok({"agent"}, {{"MOORING_INSECURE", text}}).config.insecure, want) << text;
    EXPECT_EQ(ok({"agent", "--insecure=" + text}).config.insecure, want) << text;
    EXPECT_EQ(ok({"agent"}, {{"MOORING_METRICS", text}}).config.metrics, want) << text;
    const auto file = dir.write("b.json", R"({"insecure": ")" + text + R"(", "metrics": ")" + text + R"("})");
    const auto from_file = ok({"agent", "--config", file.string()});
    EXPECT_EQ(from_file.config.insecure, want) << text;
    EXPECT_EQ(from_file.config.metrics, want) << text;
  }
  // The file says true and the environment 1, as run-local's plaintext stack has it.
  const auto file = dir.write("i.json", R"({"insecure": true})");
  EXPECT_TRUE(ok({"agent", "--config", file.string()}, {{"MOORING_INSECURE", "1"}}).config.insecure);
  EXPECT_EQ(err({"agent"}, {{"MOORING_INSECURE", "sure"}}),
            "environment: insecure: expected true or false (1/0, on/off, yes/no), got \"sure\"");
}

TEST(AgentConfig, DefaultsMatchTheDesignPorts) {
  const auto p = ok({"agent"});
  EXPECT_FALSE(p.help);
  EXPECT_EQ(p.config.controlplane_addr, "127.0.0.1:4701");
  EXPECT_EQ(p.config.grpc_addr, "127.0.0.1:4702");
  EXPECT_TRUE(p.config.node_id.empty());
  EXPECT_TRUE(p.config.plugins.empty());
  EXPECT_EQ(p.config.drain_on_shutdown.count(), 0) << "allocations survive an agent restart unless asked";
}

TEST(AgentConfig, MetricsOnByDefaultOnTheDesignPortAndOffWithTheFlag) {
  TempDir dir;
  const auto d = ok({"agent"});
  EXPECT_TRUE(d.config.metrics);
  EXPECT_EQ(d.config.metrics_addr, "127.0.0.1:4703");
  EXPECT_FALSE(ok({"agent", "--metrics=off"}).config.metrics);
  EXPECT_FALSE(ok({"agent"}, {{"MOORING_METRICS", "false"}}).config.metrics);
  EXPECT_TRUE(ok({"agent", "--metrics"}).config.metrics);
  const auto file = dir.write("agent.json", R"({"metrics": false, "metrics_addr": "127.0.0.1:9000"})");
  const auto from_file = ok({"agent", "--config", file.string()});
  EXPECT_FALSE(from_file.config.metrics);
  EXPECT_EQ(from_file.config.metrics_addr, "127.0.0.1:9000");
  EXPECT_EQ(ok({"agent", "--metrics-addr", "0.0.0.0:9100"}).config.metrics_addr, "0.0.0.0:9100");
  EXPECT_NE(err({"agent", "--metrics=maybe"}).find("on/off"), std::string::npos);
  EXPECT_NE(err({"agent", "--metrics-addr", "no-port"}).find("metrics_addr"), std::string::npos);
  EXPECT_NE(err({"agent", "--metrics-addr", "h:99999"}).find("is not HOST:PORT"), std::string::npos);
  // Off: the address is not looked at.
  EXPECT_FALSE(ok({"agent", "--metrics=off", "--metrics-addr", "nonsense"}).config.metrics);
}

TEST(AgentConfig, StatusBatchWindowFromEachSourceAndBounded) {
  TempDir dir;
  EXPECT_EQ(ok({"agent"}).config.status_batch_window, std::chrono::milliseconds(5));
  const auto file = dir.write("agent.json", R"({"status_batch_window":"50ms"})");
  EXPECT_EQ(ok({"agent", "--config", file.string()}).config.status_batch_window, std::chrono::milliseconds(50));
  EXPECT_EQ(ok({"agent"}, {{"MOORING_STATUS_BATCH_WINDOW", "200ms"}}).config.status_batch_window,
            std::chrono::milliseconds(200));
  EXPECT_EQ(ok({"agent", "--status-batch-window", "0"}).config.status_batch_window.count(), 0);
  const auto too_long = err({"agent", "--status-batch-window", "1m"});
  EXPECT_NE(too_long.find("status_batch_window"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("at most 10s"), std::string::npos) << too_long;
  EXPECT_NE(err({"agent", "--status-batch-window", "soon"}).find("not a duration"), std::string::npos);
}

TEST(AgentConfig, VolumeStatsIntervalDefaultsToAMinuteAndZeroTurnsItOff) {
  TempDir dir;
  EXPECT_EQ(ok({"agent"}).config.volume_stats_interval, std::chrono::seconds(60));
  const auto file = dir.write("agent.json", R"({"volume_stats_interval":"10s"})");
  EXPECT_EQ(ok({"agent", "--config", file.string()}).config.volume_stats_interval, std::chrono::seconds(10));
  EXPECT_EQ(ok({"agent"}, {{"MOORING_VOLUME_STATS_INTERVAL", "5m"}}).config.volume_stats_interval,
            std::chrono::minutes(5));
  EXPECT_EQ(ok({"agent", "--volume-stats-interval", "0"}).config.volume_stats_interval.count(), 0);
  EXPECT_NE(err({"agent", "--volume-stats-interval", "often"}).find("not a duration"), std::string::npos);
}

TEST(AgentConfig, DrainOnShutdownFromEachSource) {
  TempDir dir;
  const auto file = dir.write("agent.json", R"({"drain_on_shutdown":"20s"})");
  EXPECT_EQ(ok({"agent", "--config", file.string()}).config.drain_on_shutdown, std::chrono::seconds(20));
  EXPECT_EQ(ok({"agent"}, {{"MOORING_DRAIN_ON_SHUTDOWN", "1m"}}).config.drain_on_shutdown, std::chrono::minutes(1));
  EXPECT_EQ(ok({"agent", "--drain-on-shutdown", "500ms"}).config.drain_on_shutdown, std::chrono::milliseconds(500));
  // 0, the documented "off", is accepted from every source.
  EXPECT_EQ(ok({"agent", "--drain-on-shutdown", "0"}).config.drain_on_shutdown.count(), 0);
  EXPECT_EQ(ok({"agent"}, {{"MOORING_DRAIN_ON_SHUTDOWN", "0s"}}).config.drain_on_shutdown.count(), 0);
  EXPECT_EQ(ok({"agent", "--config", dir.write("zero.json", R"({"drain_on_shutdown":0})").string()})
                .config.drain_on_shutdown.count(),
            0);
  const auto r = parse_agent_config({"agent", "--drain-on-shutdown", "soon"}, {});
  ASSERT_TRUE(std::holds_alternative<ConfigError>(r));
  EXPECT_NE(std::get<ConfigError>(r).message.find("drain_on_shutdown"), std::string::npos)
      << std::get<ConfigError>(r).message;
}

TEST(AgentConfig, FlagsWinOverEnvironmentWhichWinsOverFile) {
  TempDir dir;
  const auto file = dir.write("agent.json", R"({"node_name":"from-file","data_dir":"/file","grpc_addr":"file:1",
    "controlplane_addr":"file:2"})");
  const auto p = ok({"agent", "--config", file.string(), "--node-name=from-flag"},
                    {{"MOORING_NODE_NAME", "from-env"}, {"MOORING_DATA_DIR", "/env"}, {"PATH", "/bin"}});
  EXPECT_EQ(p.config.node_name, "from-flag");
  EXPECT_EQ(p.config.data_dir, "/env");
  EXPECT_EQ(p.config.grpc_addr, "file:1");
  EXPECT_EQ(p.config.controlplane_addr, "file:2");
  EXPECT_EQ(p.config.config_file, file.string());
}

TEST(AgentConfig, ConfigFileFromEnvironment) {
  TempDir dir;
  const auto file = dir.write("agent.json", R"({"log_level":"debug"})");
  const auto p = ok({"agent"}, {{"MOORING_CONFIG", file.string()}});
  EXPECT_EQ(p.config.log_level, "debug");
}

TEST(AgentConfig, PluginsFromFileWithAllFields) {
  TempDir dir;
  const auto file = dir.write("agent.json", R"({"plugins":[
    {"id":"hostpath","type":"monolith","command":"/bin/hp","args":["--a","b,c"],"env":{"K":"V"},
     "health_timeout":"2s","probe_interval":"250ms","fingerprint_interval":10,"stop_timeout":"1m"},
    {"id":"ebs","type":"node","socket":"unix:///run/ebs/csi.sock"}]})");
  const auto p = ok({"agent", "--config", file.string()});
  ASSERT_EQ(p.config.plugins.size(), 2u);
  const auto& hp = p.config.plugins[0];
  EXPECT_EQ(hp.id, "hostpath");
  EXPECT_EQ(hp.type, PluginRole::monolith);
  EXPECT_EQ(hp.command, "/bin/hp");
  EXPECT_EQ(hp.args, (std::vector<std::string>{"--a", "b,c"}));
  EXPECT_EQ(hp.env.at("K"), "V");
  EXPECT_EQ(hp.health_timeout, std::chrono::seconds(2));
  EXPECT_EQ(hp.probe_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(hp.fingerprint_interval, std::chrono::seconds(10));
  EXPECT_EQ(hp.stop_timeout, std::chrono::minutes(1));
  EXPECT_TRUE(hp.launched());
  const auto& ebs = p.config.plugins[1];
  EXPECT_EQ(ebs.type, PluginRole::node);
  EXPECT_EQ(ebs.socket, "/run/ebs/csi.sock");
  EXPECT_FALSE(ebs.launched());
  EXPECT_EQ(ebs.health_timeout, std::chrono::seconds(30));
}

TEST(AgentConfig, RepeatablePluginFlagShortFormAndFlagReplacesFilePluginWithSameId) {
  TempDir dir;
  const auto file = dir.write("agent.json", R"({"plugins":[{"id":"a","type":"node","command":"/bin/a"},
                                                           {"id":"b","type":"node","command":"/bin/b"}]})");
  const auto p = ok({"agent", "--config", file.string(), "--plugin",
                     "b,type=controller,command=/bin/b2,arg=-v,arg=--x=1,env=A=1=2,health_timeout=3s", "--plugin",
                     "id=c,type=monolith,socket=/s.sock"});
  ASSERT_EQ(p.config.plugins.size(), 3u);
  EXPECT_EQ(p.config.plugins[0].id, "a");
  EXPECT_EQ(p.config.plugins[1].id, "b");
  EXPECT_EQ(p.config.plugins[1].type, PluginRole::controller);
  EXPECT_EQ(p.config.plugins[1].command, "/bin/b2");
  EXPECT_EQ(p.config.plugins[1].args, (std::vector<std::string>{"-v", "--x=1"}));
  EXPECT_EQ(p.config.plugins[1].env.at("A"), "1=2");
  EXPECT_EQ(p.config.plugins[1].health_timeout, std::chrono::seconds(3));
  EXPECT_EQ(p.config.plugins[2].socket, "/s.sock");
}

TEST(AgentConfig, PluginsFromEnvironmentSeparatedBySemicolons) {
  const auto p = ok({"agent"}, {{"MOORING_PLUGINS", "x,type=node,command=/x;y,type=controller,command=/y"}});
  ASSERT_EQ(p.config.plugins.size(), 2u);
  EXPECT_EQ(p.config.plugins[1].id, "y");
}

TEST(AgentConfig, OneIdMayNameAControllerAndANodeInstanceOfASplitPlugin) {
  const auto p = ok({"agent", "--plugin", "csi,type=controller,command=/bin/ctl", "--plugin",
                     "csi,type=node,socket=/run/csi/node.sock"});
  ASSERT_EQ(p.config.plugins.size(), 2u);
  EXPECT_EQ(p.config.plugins[0].type, PluginRole::controller);
  EXPECT_EQ(p.config.plugins[1].type, PluginRole::node);
  EXPECT_EQ(p.config.plugins[1].socket, "/run/csi/node.sock");

  // A later source replaces the pair as a whole (the flags' monolith wins over the file's pair).
  TempDir dir;
  const auto file = dir.write("split.json", R"({"plugins":[{"id":"csi","type":"controller","command":"/c"},
                                                           {"id":"csi","type":"node","command":"/n"},
                                                           {"id":"other","type":"node","command":"/o"}]})");
  const auto merged = ok({"agent", "--config", file.string(), "--plugin", "csi,type=monolith,command=/m"});
  ASSERT_EQ(merged.config.plugins.size(), 2u);
  EXPECT_EQ(merged.config.plugins[0].id, "csi");
  EXPECT_EQ(merged.config.plugins[0].type, PluginRole::monolith);
  EXPECT_EQ(merged.config.plugins[1].id, "other");
}

TEST(AgentConfig, AnIdNamingTwoOfOneTypeOrAMonolithBesideAnotherEntryIsRefused) {
  const auto two_nodes = err({"agent", "--plugin", "p,type=node,command=/a", "--plugin", "p,type=node,command=/b"});
  EXPECT_NE(two_nodes.find("plugin id \"p\" appears twice (as node and node)"), std::string::npos) << two_nodes;
  const auto monolith = err({"agent", "--plugin", "p,type=monolith,command=/a", "--plugin", "p,type=node,command=/b"});
  EXPECT_NE(monolith.find("one controller and one node instance"), std::string::npos) << monolith;
  const auto three = err({"agent", "--plugin", "p,type=controller,command=/a", "--plugin", "p,type=node,command=/b",
                          "--plugin", "p,type=node,command=/c"});
  EXPECT_NE(three.find("appears 3 times"), std::string::npos) << three;
  const auto one_socket =
      err({"agent", "--plugin", "p,type=controller,socket=/s.sock", "--plugin", "p,type=node,socket=/s.sock"});
  EXPECT_NE(one_socket.find("type=monolith"), std::string::npos) << one_socket;
}

TEST(AgentConfig, HelpListsEveryFlagAndItsEnvironmentVariable) {
  EXPECT_TRUE(ok({"agent", "--help"}).help);
  EXPECT_TRUE(ok({"agent", "-h", "--bogus-is-ignored-with-help"}).help);
  const auto help = agent_config_help();
  for (const auto* s : {"--node-id", "--node-name", "--data-dir", "--controlplane-addr", "--grpc-addr",
                        "--log-level", "--log-format", "--plugin", "--config", "--heartbeat-interval",
                        "MOORING_DATA_DIR", "MOORING_PLUGINS", "health_timeout"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
}

// --help-markdown (docs/configuration/nodeagent.md): asked for by its own flag; a row per setting.
TEST(AgentConfig, HelpMarkdownIsAskedForAndHasARowPerSetting) {
  const auto p = ok({"agent", "--help-markdown"});
  EXPECT_TRUE(p.help_markdown);
  EXPECT_FALSE(p.help);
  const auto page = agent_config_markdown();
  for (const auto* row : {"| `--node-id ID` | `MOORING_NODE_ID` | `node_id` |",
                          "| `--plugin SPEC` | `MOORING_PLUGINS` | `plugins` |",
                          "| `--insecure` | `MOORING_INSECURE` | `insecure` | `false` |"})
    EXPECT_NE(page.find(row), std::string::npos) << row;
}

TEST(AgentConfig, ErrorsNameTheBadKeyAndValue) {
  TempDir dir;
  EXPECT_NE(err({"agent", "--nope=1"}).find("--nope"), std::string::npos);
  EXPECT_NE(err({"agent", "--data-dir"}).find("needs a value"), std::string::npos);
  EXPECT_NE(err({"agent", "stray"}).find("\"stray\""), std::string::npos);
  EXPECT_NE(err({"agent", "--log-level", "loud"}).find("log_level: \"loud\""), std::string::npos);
  EXPECT_NE(err({"agent", "--log-format", "xml"}).find("\"xml\""), std::string::npos);
  EXPECT_NE(err({"agent", "--heartbeat-interval", "soon"}).find("\"soon\" is not a duration"), std::string::npos);

  const auto bad_key = dir.write("k.json", R"({"node_nam":"x"})");
  EXPECT_NE(err({"agent", "--config", bad_key.string()}).find("unknown key \"node_nam\""), std::string::npos);
  const auto bad_json = dir.write("j.json", R"({"node_name":)");
  EXPECT_NE(err({"agent", "--config", bad_json.string()}).find("invalid JSON"), std::string::npos);
  EXPECT_NE(err({"agent", "--config", (dir.path() / "missing.json").string()}).find("cannot be read"),
            std::string::npos);
  const auto bad_type = dir.write("t.json", R"({"plugins":[{"id":"p","type":"storage","command":"/x"}]})");
  EXPECT_NE(err({"agent", "--config", bad_type.string()}).find("plugins[0].type: \"storage\""), std::string::npos);
  const auto both = dir.write("b.json", R"({"plugins":[{"id":"p","type":"node","command":"/x","socket":"/s"}]})");
  EXPECT_NE(err({"agent", "--config", both.string()}).find("exactly one of"), std::string::npos);
  const auto neither = dir.write("n.json", R"({"plugins":[{"id":"p","type":"node"}]})");
  EXPECT_NE(err({"agent", "--config", neither.string()}).find("plugin \"p\""), std::string::npos);
  const auto dup = dir.write("d.json", R"({"plugins":[{"id":"p","type":"node","command":"/x"},
                                                      {"id":"p","type":"node","command":"/y"}]})");
  EXPECT_NE(err({"agent", "--config", dup.string()}).find("appears twice"), std::string::npos);
  const auto escape = dir.write("e.json", R"({"plugins":[{"id":"../etc","type":"node","command":"/x"}]})");
  EXPECT_NE(err({"agent", "--config", escape.string()}).find("\"../etc\""), std::string::npos);
  const auto neg = dir.write("z.json", R"({"plugins":[{"id":"p","type":"node","command":"/x","health_timeout":"0s"}]})");
  EXPECT_NE(err({"agent", "--config", neg.string()}).find("health_timeout"), std::string::npos);
  const auto unk = dir.write("u.json", R"({"plugins":[{"id":"p","type":"node","command":"/x","helth":"1s"}]})");
  EXPECT_NE(err({"agent", "--config", unk.string()}).find("unknown key \"helth\""), std::string::npos);
  EXPECT_NE(err({"agent", "--plugin", "p,type=node,command=/x,env=NOEQ"}).find("NOEQ"), std::string::npos);
  EXPECT_NE(err({"agent", "--plugin", "p,type=node,command=/x,env=CSI_ENDPOINT=1"}).find("CSI_ENDPOINT"),
            std::string::npos);
  EXPECT_NE(err({"agent", "--node-id", "a/b"}).find("node_id"), std::string::npos);
}

// Task users (issue 41): nobody by default, root refused unless the node allows it, and a default
// user the node's own rules would refuse is a configuration error, not a node that runs nothing.
TEST(AgentConfig, TaskUserRulesDefaultToNobodyWithoutRoot) {
  const auto cfg = ok({"agent"}).config;
  EXPECT_EQ(cfg.task_user, "nobody");
  EXPECT_TRUE(cfg.task_isolation);
  const auto rules = task_user_rules(cfg);
  EXPECT_EQ(rules.default_user, "nobody");
  EXPECT_EQ(rules.denylist, std::vector<std::string>{"root"});
  EXPECT_FALSE(rules.allow_root);

  const auto allowing = task_user_rules(ok({"agent", "--allow-root"}).config);
  EXPECT_TRUE(allowing.allow_root);
  EXPECT_TRUE(allowing.denylist.empty());  // allowing root un-denies it unless a list is given
  const auto listed = task_user_rules(ok({"agent", "--allow-root", "--user-denylist", "root,1001"}).config);
  EXPECT_EQ(listed.denylist, (std::vector<std::string>{"root", "1001"}));
  EXPECT_EQ(task_user_rules(ok({"agent"}, {{"MOORING_USER_DENYLIST", "postgres"}}).config).denylist,
            std::vector<std::string>{"postgres"});
  EXPECT_FALSE(ok({"agent", "--task-isolation=off"}).config.task_isolation);
  EXPECT_EQ(ok({"agent", "--task-user", "1000:100"}).config.task_user, "1000:100");

  EXPECT_NE(err({"agent", "--task-user", "root"}).find("task_user"), std::string::npos);
  EXPECT_NE(err({"agent", "--task-user", "a b"}).find("task_user"), std::string::npos);
  EXPECT_NE(err({"agent", "--user-denylist", "x y"}).find("user_denylist"), std::string::npos);
  EXPECT_EQ(ok({"agent", "--task-user", "root", "--allow-root"}).config.task_user, "root");
}

TEST(AgentConfig, ParsesDurations) {
  EXPECT_EQ(parse_duration("30s"), std::chrono::seconds(30));
  EXPECT_EQ(parse_duration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(parse_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_duration("2m"), std::chrono::minutes(2));
  EXPECT_EQ(parse_duration("1h"), std::chrono::hours(1));
  EXPECT_EQ(parse_duration("7"), std::chrono::seconds(7));
  EXPECT_FALSE(parse_duration(""));
  EXPECT_FALSE(parse_duration("s"));
  EXPECT_FALSE(parse_duration("5 s"));
  EXPECT_FALSE(parse_duration("5d"));
  EXPECT_FALSE(parse_duration("1.2.3s"));
}

TEST(NodeIdentity, GeneratedOnceAndKeptAcrossRestarts) {
  TempDir dir;
  std::error_code ec;
  const auto first = load_or_create_node_id(dir.path() / "data", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(first.size(), 36u);
  EXPECT_EQ(first[14], '4');
  const auto second = load_or_create_node_id(dir.path() / "data", ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace mooring::nodeagent
