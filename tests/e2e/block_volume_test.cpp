// Block volumes end to end with the real binaries: mooring-hostpath makes a sparse backing file,
// the agent stages it (a loop device) and publishes it as a device node in the task's volume
// path, a task writes raw bytes through it and another reads them back, and after the release
// nothing is left attached (`losetup -a`); as root on a node that allows it, and as the default
// user (nobody), whose walls hold a node of the device for its group (the host's loop device is
// root:disk 0660). Root and loop devices only; skipped with the reason.
#include <gtest/gtest.h>

#include <cstdio>

#include "plugins/hostpath/loop_device.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// What `losetup -a` lists (util-linux reads the kernel's loop devices).
std::string losetup_all() {
  std::string out;
  if (FILE* p = ::popen("losetup -a 2>&1", "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  return out;
}

// `user` empty: the node's default task user.
json block_allocation(const std::string& name, const std::string& volume, const std::string& user,
                      const std::string& script) {
  auto a = allocation(name, volume, "node-1", script);
  a["Volumes"]["data"]["AttachmentMode"] = "block-device";
  if (!user.empty()) a["Task"]["User"] = user;
  return a;
}

// The task's stdout, as the agent keeps it.
std::string task_output(Cluster& cluster, const std::string& alloc) {
  return test::read_file(cluster.node_dir("node-1") / "agent" / "allocs" / alloc / "stdout.log");
}

// The whole round trip, the tasks running as `user` on a node started with `agent_args`.
void raw_bytes_round_trip(const std::string& user, const std::vector<std::string>& agent_args) {
  Cluster cluster;
  cluster.start_controlplane();
  NodeOptions node;
  node.agent_args = agent_args;
  cluster.start_node("node-1", node);

  json body = {
      {"Volumes",
       {{{"ID", "blk"},
         {"Name", "blk"},
         {"PluginID", "hostpath"},
         {"RequestedCapacityMin", 8 << 20},
         {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "block-device"}}}}}}}};
  auto created = cluster.request("PUT", "/v1/volume/csi/blk/create", body.dump());
  ASSERT_EQ(created.status, 200) << created.body;
  fs::path image;
  for (const auto& e : fs::recursive_directory_iterator(cluster.dir() / "hostpath" / "volumes"))
    if (e.path().filename() == hostpath::kBlockImage) image = e.path();
  ASSERT_FALSE(image.empty());
  EXPECT_EQ(fs::file_size(image), 8u << 20);

  // The writer: its volume path is a block device; raw bytes at offset 4096, flushed.
  auto writer = cluster.run_alloc(block_allocation(
      "writer", "blk", user,
      "test -b \"$MOORING_VOLUME_DATA\" || { echo not-a-block-device; exit 3; }; "
      "printf 'mooring-raw-bytes' | dd of=\"$MOORING_VOLUME_DATA\" bs=4096 seek=1 conv=notrunc,fsync 2>/dev/null "
      "&& echo written; sleep 600"));
  ASSERT_FALSE(writer.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return task_output(cluster, writer).find("written") != std::string::npos; }))
      << task_output(cluster, writer) << cluster.log_tails();
  EXPECT_NE(losetup_all().find(image.string()), std::string::npos) << losetup_all();
  ASSERT_EQ(cluster.stop_alloc(writer).status, 200);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("blk") == 0; }));

  // The reader, a new allocation: the bytes are on the device.
  auto reader = cluster.run_alloc(block_allocation(
      "reader", "blk", user,
      "dd if=\"$MOORING_VOLUME_DATA\" bs=4096 skip=1 count=1 2>/dev/null | head -c 17; echo; sleep 600"));
  ASSERT_FALSE(reader.empty());
  ASSERT_TRUE(Cluster::eventually([&] {
    return task_output(cluster, reader).find("mooring-raw-bytes") != std::string::npos;
  })) << task_output(cluster, reader)
      << cluster.log_tails();
  ASSERT_EQ(cluster.stop_alloc(reader).status, 200);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("blk") == 0; }));

  // Released: no device attached to the volume, nothing mounted, the volume deleted with its file.
  EXPECT_TRUE(Cluster::eventually([&] { return losetup_all().find(image.string()) == std::string::npos; }))
      << losetup_all();
  EXPECT_TRUE(hostpath::loops_backed_by(image).empty());
  EXPECT_TRUE(cluster.mounts_of("node-1").empty());
  EXPECT_EQ(cluster.request("DELETE", "/v1/volume/csi/blk/delete").status, 200);
  EXPECT_FALSE(fs::exists(image));
}

#define MOORING_REQUIRE_LOOP_DEVICES()                                                                       \
  do {                                                                                                       \
    MOORING_REQUIRE_ROOT();                                                                                  \
    if (auto why = hostpath::check_loop_support(); !why.empty())                                             \
      GTEST_SKIP() << "loop devices are not available here (" << why << "): block volumes cannot be tested"; \
  } while (0)

TEST(BlockVolume, ARootTaskWritesAndReadsRawBytesThroughTheDeviceAndTheReleaseLeavesNothingAttached) {
  MOORING_REQUIRE_LOOP_DEVICES();
  raw_bytes_round_trip("root", {"--allow-root"});
}

TEST(BlockVolume, TheDefaultUserWritesAndReadsRawBytesThroughItsOwnNodeOfTheDevice) {
  MOORING_REQUIRE_LOOP_DEVICES();
  raw_bytes_round_trip("", {});
}

}  // namespace
}  // namespace mooring::e2e
