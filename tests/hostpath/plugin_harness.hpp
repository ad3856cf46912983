// Tests for mooring-hostpath: runs the real binary in a temp dir (socket, data dir, call log,
// fault file) and talks to it with the generated csi.v1 stubs.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "csi/v1/csi.grpc.pb.h"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::hostpath {

using Mode = csi::v1::VolumeCapability::AccessMode::Mode;

struct PluginSetup {
  std::string node_id = "node-a";
  std::string mode = "monolith";
  std::vector<std::string> extra_args;
  // A second copy beside the first (a rolling upgrade): its own socket, call log, fault file and
  // output ("<instance>.sock", ...), the same data dir.
  std::string instance;
};

class HostpathPlugin {
 public:
  HostpathPlugin(const test::TempDir& dir, PluginSetup setup = {});
  ~HostpathPlugin();

  // Spawns the binary and waits for its socket; (re)connects the stubs. Fails the test on error.
  void start();
  void kill9();                         // SIGKILL, like a crash; leaves the socket file behind
  std::optional<test::ExitStatus> terminate();  // SIGTERM and wait
  void restart() { kill9(); start(); }
  test::ChildProcess& process() { return *process_; }

  csi::v1::Identity::Stub& identity() { return *identity_; }
  csi::v1::Controller::Stub& controller() { return *controller_; }
  csi::v1::Node::Stub& node() { return *node_; }
  csi::v1::GroupController::Stub& group() { return *group_; }

  std::filesystem::path socket() const { return own("csi.sock"); }
  std::filesystem::path data_dir() const { return dir_ / "data"; }
  std::filesystem::path fault_file() const { return own("faults.json"); }
  std::filesystem::path call_log() const { return own("calls.log"); }
  const std::string& node_id() const { return setup_.node_id; }

  void set_faults(const std::string& json);
  std::vector<nlohmann::json> calls() const;
  // The rpc names in the call log, optionally only those touching volume_id.
  std::vector<std::string> call_names(const std::string& volume_id = "") const;

  // Common calls (10 s deadline). Each returns the status; outputs through pointers.
  grpc::Status create_volume(const std::string& name, std::int64_t bytes, csi::v1::Volume* out,
                             Mode mode = csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  grpc::Status create_volume(const std::string& name, std::int64_t bytes, csi::v1::Volume* out,
                             const csi::v1::VolumeCapability& capability);
  grpc::Status delete_volume(const std::string& id);
  grpc::Status controller_publish(const std::string& volume_id, const std::string& node_id, Mode mode,
                                  bool readonly = false);
  grpc::Status controller_unpublish(const std::string& volume_id, const std::string& node_id);
  grpc::Status stage(const std::string& volume_id, const std::filesystem::path& staging, Mode mode,
                     const std::string& volume_path = "");
  grpc::Status stage(const std::string& volume_id, const std::filesystem::path& staging,
                     const csi::v1::VolumeCapability& capability, const std::string& volume_path = "");
  grpc::Status unstage(const std::string& volume_id, const std::filesystem::path& staging);
  grpc::Status publish(const std::string& volume_id, const std::filesystem::path& staging,
                       const std::filesystem::path& target, Mode mode, bool readonly = false);
  grpc::Status publish(const std::string& volume_id, const std::filesystem::path& staging,
                       const std::filesystem::path& target, const csi::v1::VolumeCapability& capability,
                       bool readonly = false);
  grpc::Status unpublish(const std::string& volume_id, const std::filesystem::path& target);

 private:
  std::filesystem::path own(const std::string& name) const {
    return dir_ / (setup_.instance.empty() ? name : setup_.instance + "." + name);
  }
  const test::TempDir& dir_;
  PluginSetup setup_;
  std::unique_ptr<test::ChildProcess> process_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<csi::v1::Identity::Stub> identity_;
  std::unique_ptr<csi::v1::Controller::Stub> controller_;
  std::unique_ptr<csi::v1::Node::Stub> node_;
  std::unique_ptr<csi::v1::GroupController::Stub> group_;
};

csi::v1::VolumeCapability mount_capability(Mode mode);
csi::v1::VolumeCapability block_capability(Mode mode);
void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// A test with one plugin in its own temp dir: start() it (with its setup), and it is stopped and
// everything it mounted unmounted after the test, also when it failed.
class PluginTest : public ::testing::Test {
 protected:
  explicit PluginTest(std::string_view dir_prefix) : dir_(dir_prefix) {}
  void start(PluginSetup setup = {}) {
    plugin_ = std::make_unique<HostpathPlugin>(dir_, std::move(setup));
    ASSERT_NO_FATAL_FAILURE(plugin_->start());
  }
  void TearDown() override {
    plugin_.reset();
    dir_.unmount_all();
  }

  test::TempDir dir_;
  std::unique_ptr<HostpathPlugin> plugin_;
};

}  // namespace mooring::hostpath
