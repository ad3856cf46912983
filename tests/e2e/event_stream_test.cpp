// The event stream with the real binaries: `mooring event stream` against a control plane with
// ACLs — each token sees only the topics it may read, a stream resumed from an index continues
// exactly where the first left off, a deleted token's stream ends saying why — and streams whose
// clients vanish leave no descriptor behind, while a shutdown ends the rest cleanly.
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/descriptors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<json> stream_lines(const fs::path& file) {
  std::vector<json> out;
  std::istringstream in(test::read_file(file));
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("Index")) out.push_back(std::move(j));
  }
  return out;
}

std::size_t open_descriptors(pid_t pid) { return test::open_descriptors(pid).size(); }

class EventStreamE2E : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    streams.clear();
    cluster.reset();
  }

  // `mooring event stream ARGS -json` as `token`, its output in dir()/<name>.out.
  test::ChildProcess& stream(const std::string& name, std::vector<std::string> args, const std::string& token = "") {
    args.insert(args.begin(), {"event", "stream"});
    args.push_back("-json");
    std::map<std::string, std::string> env{{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(cluster->http_port())}};
    if (!token.empty()) env["MOORING_TOKEN"] = token;
    streams.push_back(std::make_unique<test::ChildProcess>(test::SpawnOptions{
        .binary = test::binary_path("cli/mooring"), .args = args, .env = env, .output_file = out(name)}));
    return *streams.back();
  }
  fs::path out(const std::string& name) const { return cluster->dir() / (name + ".out"); }
  bool shows(const std::string& name, const std::string& text) {
    return Cluster::eventually([&] { return test::read_file(out(name)).find(text) != std::string::npos; }, 20s);
  }

  std::unique_ptr<Cluster> cluster;
  std::vector<std::unique_ptr<test::ChildProcess>> streams;
};

TEST_F(EventStreamE2E, EachTokenSeesWhatItMayReadAndAResumedStreamContinuesWhereTheFirstStopped) {
  MOORING_REQUIRE_ROOT();
  cluster = std::make_unique<Cluster>(ClusterOptions{.acl = true});
  cluster->start_controlplane();
  auto boot = cluster->request("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(boot.status, 200u) << boot.body;
  const std::string mgmt = json::parse(boot.body)["SecretID"];
  cluster->use_token(mgmt);
  ASSERT_EQ(cluster->request("PUT", "/v1/acl/policy/nodes", R"({"Rules":{"Node":"read"}})").status, 200u);
  auto tok = cluster->request("PUT", "/v1/acl/token", R"({"Name":"node-watcher","Type":"client","Policies":["nodes"]})");
  ASSERT_EQ(tok.status, 200u) << tok.body;
  const std::string watcher = json::parse(tok.body)["SecretID"];
  const std::string watcher_accessor = json::parse(tok.body)["AccessorID"];

  cluster->start_node("node-1");
  cluster->create_volume("vol-a");
  // Still running when the test ends: the teardown's drain stops it (it used to outlive the test).
  const auto alloc = cluster->run_alloc(allocation("writer", "vol-a", "node-1", "sleep 3600"));
  ASSERT_FALSE(alloc.empty());

  stream("all", {"-index", "1"}, mgmt);
  stream("nodes", {"-index", "1"}, watcher);
  ASSERT_TRUE(shows("all", "\"vol-a\"")) << test::read_file(out("all"));
  ASSERT_TRUE(shows("all", "\"Topic\":\"Allocation\"")) << test::read_file(out("all"));
  // Live, not only the past.
  cluster->create_volume("vol-b");
  ASSERT_TRUE(shows("all", "\"vol-b\"")) << test::read_file(out("all"));

  // The node watcher: node events only, none about volumes or allocations.
  ASSERT_TRUE(shows("nodes", "\"Topic\":\"Node\"")) << test::read_file(out("nodes"));
  const auto seen = test::read_file(out("nodes"));
  EXPECT_EQ(seen.find("\"Topic\":\"Volume\""), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\"Topic\":\"Allocation\""), std::string::npos) << seen;
  EXPECT_EQ(seen.find("vol-a"), std::string::npos) << seen;

  // Resume from the middle: the second stream goes on exactly after the line it resumes from.
  const auto first = stream_lines(out("all"));
  ASSERT_GE(first.size(), 3u);
  const auto k = first.size() / 2;
  const std::uint64_t resume = first[k]["Index"].get<std::uint64_t>() + 1;
  stream("resumed", {"-index", std::to_string(resume)}, mgmt);
  ASSERT_TRUE(Cluster::eventually([&] { return stream_lines(out("resumed")).size() >= first.size() - k - 1; }, 20s));
  const auto resumed = stream_lines(out("resumed"));
  for (std::size_t i = 0; i + k + 1 < first.size(); ++i)
    EXPECT_EQ(resumed[i], first[i + k + 1]) << "line " << i << " of the resumed stream";
  EXPECT_GE(resumed.front()["Index"].get<std::uint64_t>(), resume);

  // The watcher's token is deleted: its stream ends at the next event, saying why.
  ASSERT_EQ(cluster->request("DELETE", "/v1/acl/token/" + watcher_accessor).status, 200u);
  cluster->create_volume("vol-c");
  auto ended = streams[1]->wait_for_exit(20s);
  ASSERT_TRUE(ended) << "the deleted token's stream went on";
  EXPECT_EQ(ended->code, 1);
  EXPECT_NE(test::read_file(out("nodes")).find("ACL token not found"), std::string::npos) << test::read_file(out("nodes"));
  // A stream without any token is refused up front.
  auto& anonymous = stream("anonymous", {});
  auto refused = anonymous.wait_for_exit(20s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, 1);
  EXPECT_NE(test::read_file(out("anonymous")).find("HTTP 401"), std::string::npos) << test::read_file(out("anonymous"));
}

TEST_F(EventStreamE2E, VanishedClientsLeaveNoDescriptorAndShutdownEndsStreamsCleanly) {
  MOORING_REQUIRE_ROOT();
  cluster = std::make_unique<Cluster>();
  cluster->start_controlplane();
  const auto pid = cluster->controlplane_pid();
  ASSERT_NE(pid, 0);
  const auto baseline = open_descriptors(pid);
  constexpr std::size_t kStreams = 16;
  for (std::size_t i = 0; i < kStreams; ++i) stream("s" + std::to_string(i), {});
  ASSERT_TRUE(Cluster::eventually([&] { return open_descriptors(pid) >= baseline + kStreams; }, 20s))
      << open_descriptors(pid) << " descriptors, " << baseline << " before";
  for (auto& s : streams) s->kill();
  // Well before the first heartbeat (10 s) would have found them gone.
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_TRUE(Cluster::eventually([&] { return open_descriptors(pid) <= baseline; }, 8s))
      << open_descriptors(pid) << " descriptors, " << baseline << " before";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 8s);

  // A stream still open when the control plane stops ends with its last chunk: exit 0. The
  // stream is known to be open (not merely connected) once it has shown the node's event.
  streams.clear();
  cluster->start_node("node-1");
  auto& last = stream("last", {"-index", "1"});
  ASSERT_TRUE(shows("last", "\"Topic\":\"Node\"")) << test::read_file(out("last"));
  cluster->stop_controlplane();
  auto status = last.wait_for_exit(10s);
  ASSERT_TRUE(status) << "the stream did not end with the control plane";
  EXPECT_EQ(status->code, 0) << test::read_file(out("last"));
}

}  // namespace
}  // namespace mooring::e2e
