#include "services/controlplane/config/controlplane_config.hpp"

#include <gtest/gtest.h>

#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {
namespace {

using namespace std::chrono_literals;
using Env = std::map<std::string, std::string>;

ControlPlaneConfig parse_ok(std::vector<std::string> args, const Env& env = {}) {
  args.insert(args.begin(), "mooring-controlplane");
  auto r = parse_controlplane_config(args, env);
  if (auto* e = std::get_if<ControlPlaneConfigError>(&r)) ADD_FAILURE() << e->message;
  return std::get_if<ControlPlaneArgs>(&r) ? std::get<ControlPlaneArgs>(r).config : ControlPlaneConfig{};
}

std::string parse_error(std::vector<std::string> args, const Env& env = {}) {
  args.insert(args.begin(), "mooring-controlplane");
  auto r = parse_controlplane_config(args, env);
  if (auto* e = std::get_if<ControlPlaneConfigError>(&r)) return e->message;
  ADD_FAILURE() << "expected an error";
  return {};
}

TEST(ControlPlaneConfig, AclIsOffByDefaultAndABareFlagTurnsItOn) {
  EXPECT_TRUE(parse_ok({"--data-dir", "/tmp/x"}).acl);  // secure by default
  EXPECT_TRUE(parse_ok({"--data-dir", "/tmp/x", "--acl"}).acl);
  EXPECT_TRUE(parse_ok({"--acl", "--data-dir", "/tmp/x"}).acl);
  EXPECT_FALSE(parse_ok({"--acl=false", "--data-dir", "/tmp/x"}).acl);
  EXPECT_FALSE(parse_ok({"--data-dir", "/tmp/x"}, {{"MOORING_CP_ACL", "false"}}).acl);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--acl=maybe"}).find("--acl"), std::string::npos);
}

TEST(ControlPlaneConfig, BooleansAcceptOneZeroOnOffTrueFalseFromEverySource) {
  test::TempDir dir;
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{
           {"1", true}, {"0", false}, {"on", true}, {"off", false}, {"true", true}, {"false", false}, {"no", false}}) {
    EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x", "--insecure=" + text}).insecure, want) << text;
    EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x"}, {{"MOORING_CP_ACL", text}}).acl, want) << text;
    const auto file = dir.path() / "b.json";
    test::write_file(file, R"({"data_dir": "/tmp/x", "metrics": ")" + text + R"("})");
    EXPECT_EQ(parse_ok({"--config", file.string()}).metrics, want) << text;
  }
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x"}, {{"MOORING_CP_INSECURE", "sure"}})
                .find("expected true or false (1/0, on/off, yes/no), got \"sure\""),
            std::string::npos);
}

TEST(ControlPlaneConfig, MetricsOnByDefaultAndOffWithTheFlag) {
  EXPECT_TRUE(parse_ok({"--data-dir", "/tmp/x"}).metrics);
  EXPECT_FALSE(parse_ok({"--data-dir", "/tmp/x", "--metrics=off"}).metrics);
  EXPECT_FALSE(parse_ok({"--data-dir", "/tmp/x"}, {{"MOORING_CP_METRICS", "off"}}).metrics);
  EXPECT_TRUE(parse_ok({"--data-dir", "/tmp/x", "--metrics=on"}).metrics);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--metrics=sometimes"}).find("--metrics"), std::string::npos);
}

TEST(ControlPlaneConfig, DefaultsNeedOnlyTheDataDir) {
  const auto c = parse_ok({"--data-dir", "/tmp/x"});
  EXPECT_EQ(c.data_dir, "/tmp/x");
  EXPECT_EQ(c.http_addr, "127.0.0.1:4700");
  EXPECT_EQ(c.grpc_addr, "127.0.0.1:4701");
  EXPECT_EQ(c.heartbeat_ttl, 10s);
  EXPECT_EQ(c.http_max_connections, 1024u);
  EXPECT_EQ(c.http_max_connections_per_client, 256u);
  EXPECT_EQ(c.gc_retry_max, 30s);
  EXPECT_EQ(c.gc_sweep_period, 5min);
  EXPECT_EQ(c.log_level, log::Level::info);
  EXPECT_TRUE(c.cors_read_origins.empty());
  EXPECT_EQ(parse_error({}), "--data-dir (MOORING_CP_DATA_DIR, file key data_dir) is required");
}

// The HTTPS client CA and the CA key for node enrollment both go with the TLS files.
TEST(ControlPlaneConfig, HttpsClientCaAndCaKeyNeedTheTlsFiles) {
  const auto c = parse_ok({"--data-dir", "/tmp/x", "--tls-ca-file", "ca.pem", "--tls-cert-file", "c.pem",
                           "--tls-key-file", "k.pem"},
                          {{"MOORING_CP_HTTP_CLIENT_CA_FILE", "clients.pem"}, {"MOORING_CP_TLS_CA_KEY_FILE", "ca-key.pem"}});
  EXPECT_EQ(c.http_client_ca_file, "clients.pem");
  EXPECT_EQ(c.tls_ca_key_file, "ca-key.pem");
  for (const std::string flag : {"--http-client-ca-file", "--tls-ca-key-file"})
    EXPECT_NE(parse_error({"--data-dir", "/tmp/x", flag, "ca.pem"}).find(flag + " needs"), std::string::npos) << flag;
}

TEST(ControlPlaneConfig, StateIsSqliteByDefaultOrEtcdWithItsTlsFiles) {
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x"}).state, "");
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x", "--state", "sqlite:///tmp/x/state.db"}).state, "sqlite:///tmp/x/state.db");
  const auto c = parse_ok({"--data-dir", "/tmp/x", "--state", "etcd://10.0.0.1:2379,10.0.0.2:2379/m", "--etcd-cacert",
                           "ca.pem", "--etcd-cert", "c.pem", "--etcd-key", "k.pem"});
  EXPECT_EQ(c.state, "etcd://10.0.0.1:2379,10.0.0.2:2379/m");
  EXPECT_EQ(c.etcd_ca_file, "ca.pem");
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x"}, {{"MOORING_CP_STATE", "etcd://e:2379"}}).state, "etcd://e:2379");
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--state", "sqlite:///elsewhere.db"}).find("--state: expected"),
            std::string::npos);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--state", "etcd://nohost/m"}).find("not host:port"), std::string::npos);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--etcd-cacert", "ca.pem"}).find("need --state etcd://"),
            std::string::npos);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--state", "etcd://e:1", "--etcd-cacert", "ca.pem", "--etcd-cert", "c.pem"})
                .find("go together"),
            std::string::npos);
}

TEST(ControlPlaneConfig, LeaderLeaseAndAdvertisedAddressesForHighAvailability) {
  const auto d = parse_ok({"--data-dir", "/tmp/x"});
  EXPECT_EQ(d.leader_lease, std::chrono::milliseconds(2000));
  EXPECT_TRUE(d.advertise_http_addr.empty());
  const auto c = parse_ok({"--data-dir", "/tmp/x", "--state", "etcd://e:2379", "--leader-lease", "5s",
                           "--advertise-http-addr", "https://10.0.0.1:4700", "--advertise-grpc-addr", "10.0.0.1:4701"});
  EXPECT_EQ(c.leader_lease, std::chrono::milliseconds(5000));
  EXPECT_EQ(c.advertise_http_addr, "https://10.0.0.1:4700");
  EXPECT_EQ(c.advertise_grpc_addr, "10.0.0.1:4701");
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--advertise-http-addr", "10.0.0.1:4700"}).find("advertise_http_addr"),
            std::string::npos);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--advertise-grpc-addr", "nohost"}).find("advertise_grpc_addr"),
            std::string::npos);
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--leader-lease", "0s"}).find("leader"), std::string::npos);
}

TEST(ControlPlaneConfig, StaleReadsOfADegradedLeaderLastFiveMinutesByDefaultAndZeroRefusesThem) {
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x"}).stale_reads_max, std::chrono::minutes(5));
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x", "--stale-reads-max", "30s"}).stale_reads_max, std::chrono::seconds(30));
  EXPECT_EQ(parse_ok({"--data-dir", "/tmp/x", "--stale-reads-max", "0s"}).stale_reads_max, std::chrono::milliseconds(0));
  EXPECT_NE(parse_error({"--data-dir", "/tmp/x", "--stale-reads-max", "soon"}).find("stale-reads-max"), std::string::npos);
}

TEST(ControlPlaneConfig, FlagsWinOverEnvironmentWhichWinsOverTheFile) {
  test::TempDir dir;
  const auto file = dir.path() / "cp.json";
  test::write_file(file, R"({"data_dir": "/from/file", "http_addr": "0.0.0.0:80", "heartbeat_ttl": "1m",
                             "cors_write_origins": ["https://a.example"], "log_format": "json"})");
  const auto c = parse_ok({"--config", file.string(), "--http-addr=127.0.0.1:9000"},
                          {{"MOORING_CP_HTTP_ADDR", "127.0.0.1:8000"},
                           {"MOORING_CP_HEARTBEAT_TTL", "20s"},
                           {"MOORING_CP_CORS_READ_ORIGINS", "https://b.example, https://c.example"},
                           {"MOORING_DATA_DIR", "/agent/setting/ignored"}});
  EXPECT_EQ(c.config_file, file.string());
  EXPECT_EQ(c.data_dir, "/from/file");
  EXPECT_EQ(c.http_addr, "127.0.0.1:9000");
  EXPECT_EQ(c.heartbeat_ttl, 20s);
  EXPECT_EQ(c.log_format, log::Format::json);
  EXPECT_EQ(c.cors_write_origins, std::vector<std::string>{"https://a.example"});
  EXPECT_EQ(c.cors_read_origins, (std::vector<std::string>{"https://b.example", "https://c.example"}));
}

TEST(ControlPlaneConfig, ConfigFileFromTheEnvironmentAndRepeatedListFlags) {
  test::TempDir dir;
  const auto file = dir.path() / "cp.json";
  test::write_file(file, R"({"data_dir": "/d", "gc_retry_max": "2s"})");
  const auto c = parse_ok({"--cors-read-origin", "https://a", "--cors-read-origin", "https://b"},
                          {{"MOORING_CP_CONFIG", file.string()}});
  EXPECT_EQ(c.gc_retry_max, 2s);
  EXPECT_EQ(c.cors_read_origins, (std::vector<std::string>{"https://a", "https://b"}));
}

TEST(ControlPlaneConfig, HttpConnectionLimitsFromFlagsEnvironmentAndFile) {
  test::TempDir dir;
  const auto file = dir.path() / "cp.json";
  test::write_file(file, R"({"data_dir": "/d", "http_max_connections": 4096, "http_max_connections_per_client": "64"})");
  auto c = parse_ok({"--config", file.string()});
  EXPECT_EQ(c.http_max_connections, 4096u);
  EXPECT_EQ(c.http_max_connections_per_client, 64u);
  c = parse_ok({"--config", file.string(), "--http-max-connections-per-client", "32"},
               {{"MOORING_CP_HTTP_MAX_CONNECTIONS", "2048"}});
  EXPECT_EQ(c.http_max_connections, 2048u);
  EXPECT_EQ(c.http_max_connections_per_client, 32u);

  EXPECT_EQ(parse_error({"--data-dir", "/d", "--http-max-connections", "0"}),
            "--http-max-connections: expected a positive integer, got \"0\"");
  EXPECT_EQ(parse_error({"--data-dir", "/d", "--http-max-connections-per-client=1k"}),
            "--http-max-connections-per-client: expected a positive integer, got \"1k\"");
  EXPECT_EQ(parse_error({"--data-dir", "/d"}, {{"MOORING_CP_HTTP_MAX_CONNECTIONS", "-5"}}),
            "MOORING_CP_HTTP_MAX_CONNECTIONS: expected a positive integer, got \"-5\"");
  test::write_file(file, R"({"data_dir": "/d", "http_max_connections": -1})");
  EXPECT_EQ(parse_error({"--config", file.string()}),
            "config file \"" + file.string() + "\": http_max_connections: expected a positive integer, got -1");
}

TEST(ControlPlaneConfig, BadValuesNameTheirSource) {
  EXPECT_EQ(parse_error({"--data-dir", "/d", "--bogus", "1"}), "unknown flag --bogus (see --help)");
  EXPECT_EQ(parse_error({"--data-dir", "/d", "--heartbeat-ttl", "0s"}),
            "--heartbeat-ttl: expected a positive duration like 10s, got \"0s\"");
  EXPECT_EQ(parse_error({"--data-dir", "/d"}, {{"MOORING_CP_LOG_LEVEL", "loud"}}),
            "MOORING_CP_LOG_LEVEL: expected debug|info|warn|error, got \"loud\"");
  EXPECT_EQ(parse_error({"--data-dir", "/d", "--http-addr", "nowhere"}),
            "http_addr: expected HOST:PORT, got \"nowhere\"");
  EXPECT_EQ(parse_error({"--data-dir"}), "flag --data-dir needs a value");
  EXPECT_EQ(parse_error({"--config", "/nonexistent/cp.json"}), "config file \"/nonexistent/cp.json\": cannot be read");

  test::TempDir dir;
  const auto file = dir.path() / "cp.json";
  test::write_file(file, R"({"data_dir": "/d", "grpc_port": 1})");
  EXPECT_EQ(parse_error({"--config", file.string()}), "config file \"" + file.string() + "\": unknown key \"grpc_port\"");
  test::write_file(file, R"({"data_dir": 7})");
  EXPECT_EQ(parse_error({"--config", file.string()}),
            "config file \"" + file.string() + "\": data_dir: expected a string, got 7");
}

TEST(ControlPlaneConfig, HelpListsEveryFlagWithItsVariableAndKey) {
  auto r = parse_controlplane_config({"mooring-controlplane", "--bogus", "--help"}, {});
  ASSERT_TRUE(std::holds_alternative<ControlPlaneArgs>(r));
  EXPECT_TRUE(std::get<ControlPlaneArgs>(r).help);
  const auto help = controlplane_config_help();
  for (const char* s : {"--data-dir", "MOORING_CP_DATA_DIR", "\"gc_sweep_period\"", "--gc-retry-max", "--config",
                        "MOORING_CP_CORS_WRITE_ORIGINS", "default 127.0.0.1:4700",
                        "--http-max-connections-per-client", "MOORING_CP_HTTP_MAX_CONNECTIONS", "default 1024"})
    EXPECT_NE(help.find(s), std::string::npos) << s;
}

// --help-markdown (docs/configuration/controlplane.md): a row per flag of --help, even on a bad
// command line (as --help), and nothing is started.
TEST(ControlPlaneConfig, HelpMarkdownIsAskedForAndHasARowPerFlag) {
  auto r = parse_controlplane_config({"mooring-controlplane", "--bogus", "--help-markdown"}, {});
  ASSERT_TRUE(std::holds_alternative<ControlPlaneArgs>(r));
  EXPECT_TRUE(std::get<ControlPlaneArgs>(r).help_markdown);
  EXPECT_FALSE(std::get<ControlPlaneArgs>(r).help);
  const auto page = controlplane_config_markdown();
  const auto help = controlplane_config_help();
  std::size_t rows = 0;
  for (std::size_t at = help.find("\n  --"); at != std::string::npos; at = help.find("\n  --", at + 1)) {
    const auto flag = help.substr(at + 3, help.find_first_of(" \n", at + 3) - at - 3);
    EXPECT_NE(page.find("| `" + flag), std::string::npos) << flag;
    ++rows;
  }
  EXPECT_GT(rows, 30u);
  EXPECT_NE(page.find("| `--node-cert-ttl DURATION` | `MOORING_CP_NODE_CERT_TTL` | `node_cert_ttl` | `168h` |"),
            std::string::npos);
}

}  // namespace
}  // namespace mooring::controlplane
