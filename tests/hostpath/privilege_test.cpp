// mooring-hostpath without mount privilege: it still starts, says why in its log, and Probe
// reports FAILED_PRECONDITION with the reason so the orchestrator marks it unhealthy.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::hostpath {
namespace {

using namespace std::chrono_literals;

TEST(HostpathPrivilege, NodeWithoutMountPrivilegeFailsProbeWithTheReason) {
  test::TempDir dir("hp-priv");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);  // writable for the unprivileged user
  const auto binary = test::binary_path("mooring-hostpath");
  std::vector<std::string> prefix;
  if (::geteuid() == 0) {
    // Drop to nobody: no CAP_SYS_ADMIN, so bind mounts fail like in an unprivileged container.
    const std::string setpriv = "/usr/bin/setpriv";
    if (!std::filesystem::exists(setpriv)) GTEST_SKIP() << "needs setpriv to drop root privileges";
    prefix = {"--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    test::ChildProcess check({setpriv, {"--reuid=65534", "--regid=65534", "--clear-groups", "--", "test", "-x",
                                        binary.string()},
                              {}, true, {}});
    const auto st = check.wait_for_exit(30s);
    if (!st || !st->exited || st->code != 0) GTEST_SKIP() << "the unprivileged user cannot run " << binary;
  }
  const auto sock = dir / "csi.sock";
  std::vector<std::string> args = prefix;
  const std::string program = prefix.empty() ? binary.string() : "/usr/bin/setpriv";
  if (!prefix.empty()) args.push_back(binary.string());
  args.insert(args.end(), {"--endpoint", "unix://" + sock.string(), "--data-dir", (dir / "data").string(), "--mode",
                           "node", "--node-id", "n1"});
  test::ChildProcess plugin({program, args, {}, true, dir / "out"});
  ASSERT_TRUE(plugin.wait_for_path(sock, 60s)) << plugin.output();

  auto channel = grpc::CreateChannel("unix://" + sock.string(), grpc::InsecureChannelCredentials());
  auto identity = csi::v1::Identity::NewStub(channel);
  csi::v1::ProbeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx, 30s);
  const auto st = identity->Probe(&ctx, {}, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("CAP_SYS_ADMIN"), std::string::npos) << st.error_message();
  EXPECT_NE(plugin.output().find("cannot mount"), std::string::npos) << plugin.output();
}

}  // namespace
}  // namespace mooring::hostpath
