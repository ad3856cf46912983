#include "tests/hostpath/plugin_harness.hpp"

#include <gtest/gtest.h>

#include <iostream>

#include "tests/support/files.hpp"

namespace mooring::hostpath {

using namespace std::chrono_literals;

csi::v1::VolumeCapability mount_capability(Mode mode) {
  csi::v1::VolumeCapability cap;
  cap.mutable_mount();
  cap.mutable_access_mode()->set_mode(mode);
  return cap;
}

csi::v1::VolumeCapability block_capability(Mode mode) {
  csi::v1::VolumeCapability cap;
  cap.mutable_block();
  cap.mutable_access_mode()->set_mode(mode);
  return cap;
}

void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

HostpathPlugin::HostpathPlugin(const test::TempDir& dir, PluginSetup setup) : dir_(dir), setup_(std::move(setup)) {}

HostpathPlugin::~HostpathPlugin() {
  if (process_ && process_->running()) terminate();
  // The plugin's log explains most failures; show it only when the test failed.
  if (process_ && ::testing::Test::HasFailure()) std::cerr << "--- mooring-hostpath output ---\n" << process_->output();
}

void HostpathPlugin::start() {
  std::vector<std::string> args = {"--endpoint",  "unix://" + socket().string(),
                                   "--data-dir",  data_dir().string(),
                                   "--node-id",   setup_.node_id,
                                   "--mode",      setup_.mode,
                                   "--call-log",  call_log().string(),
                                   "--log-level", "debug"};
  args.insert(args.end(), setup_.extra_args.begin(), setup_.extra_args.end());
  test::SpawnOptions opts{test::binary_path("mooring-hostpath"), args, {{"MOORING_FAULT_FILE", fault_file().string()}},
                          true, own("plugin.out")};
  process_.reset();  // reaps (kills) a previous instance
  process_ = std::make_unique<test::ChildProcess>(opts);
  // A killed predecessor leaves its socket file: wait for the new process to be listening.
  bool ready = false;
  for (int attempt = 0; attempt < 300 && !ready; ++attempt) {
    if (!process_->running()) break;
    // A private subchannel pool: otherwise gRPC reuses the global subchannel still attached to
    // the killed predecessor and the first call fails with UNAVAILABLE "Broken pipe".
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel("unix://" + socket().string(), grpc::InsecureChannelCredentials(), args);
    ready = channel_->WaitForConnected(std::chrono::system_clock::now() + 100ms);
  }
  ASSERT_TRUE(ready) << "plugin did not start; output:\n" << process_->output();
  identity_ = csi::v1::Identity::NewStub(channel_);
  controller_ = csi::v1::Controller::NewStub(channel_);
  node_ = csi::v1::Node::NewStub(channel_);
  group_ = csi::v1::GroupController::NewStub(channel_);
}

void HostpathPlugin::kill9() {
  if (!process_) return;
  process_->kill();
  process_->wait_for_exit(30s);
}

std::optional<test::ExitStatus> HostpathPlugin::terminate() {
  process_->terminate();
  return process_->wait_for_exit(30s);
}

void HostpathPlugin::set_faults(const std::string& json) { test::write_file(fault_file(), json); }

std::vector<nlohmann::json> HostpathPlugin::calls() const {
  std::vector<nlohmann::json> out;
  for (const auto& line : test::read_lines(call_log())) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> HostpathPlugin::call_names(const std::string& volume_id) const {
  std::vector<std::string> out;
  for (const auto& c : calls()) {
    if (volume_id.empty() || c.at("volume_id") == volume_id) out.push_back(c.at("rpc").get<std::string>());
  }
  return out;
}

grpc::Status HostpathPlugin::create_volume(const std::string& name, std::int64_t bytes, csi::v1::Volume* out,
                                           Mode mode) {
  return create_volume(name, bytes, out, mount_capability(mode));
}

grpc::Status HostpathPlugin::create_volume(const std::string& name, std::int64_t bytes, csi::v1::Volume* out,
                                           const csi::v1::VolumeCapability& capability) {
  csi::v1::CreateVolumeRequest req;
  req.set_name(name);
  req.mutable_capacity_range()->set_required_bytes(bytes);
  *req.add_volume_capabilities() = capability;
  csi::v1::CreateVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  auto st = controller().CreateVolume(&ctx, req, &resp);
  if (out) *out = resp.volume();
  return st;
}

grpc::Status HostpathPlugin::delete_volume(const std::string& id) {
  csi::v1::DeleteVolumeRequest req;
  req.set_volume_id(id);
  csi::v1::DeleteVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return controller().DeleteVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::controller_publish(const std::string& volume_id, const std::string& node_id, Mode mode,
                                                bool readonly) {
  csi::v1::ControllerPublishVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_node_id(node_id);
  *req.mutable_volume_capability() = mount_capability(mode);
  req.set_readonly(readonly);
  csi::v1::ControllerPublishVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return controller().ControllerPublishVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::controller_unpublish(const std::string& volume_id, const std::string& node_id) {
  csi::v1::ControllerUnpublishVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_node_id(node_id);
  csi::v1::ControllerUnpublishVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return controller().ControllerUnpublishVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::stage(const std::string& volume_id, const std::filesystem::path& staging, Mode mode,
                                   const std::string& volume_path) {
  return stage(volume_id, staging, mount_capability(mode), volume_path);
}

grpc::Status HostpathPlugin::stage(const std::string& volume_id, const std::filesystem::path& staging,
                                   const csi::v1::VolumeCapability& capability, const std::string& volume_path) {
  csi::v1::NodeStageVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_staging_target_path(staging.string());
  *req.mutable_volume_capability() = capability;
  if (!volume_path.empty()) (*req.mutable_volume_context())["path"] = volume_path;
  csi::v1::NodeStageVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return node().NodeStageVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::unstage(const std::string& volume_id, const std::filesystem::path& staging) {
  csi::v1::NodeUnstageVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_staging_target_path(staging.string());
  csi::v1::NodeUnstageVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return node().NodeUnstageVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::publish(const std::string& volume_id, const std::filesystem::path& staging,
                                     const std::filesystem::path& target, Mode mode, bool readonly) {
  return publish(volume_id, staging, target, mount_capability(mode), readonly);
}

grpc::Status HostpathPlugin::publish(const std::string& volume_id, const std::filesystem::path& staging,
                                     const std::filesystem::path& target, const csi::v1::VolumeCapability& capability,
                                     bool readonly) {
  csi::v1::NodePublishVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_staging_target_path(staging.string());
  req.set_target_path(target.string());
  *req.mutable_volume_capability() = capability;
  req.set_readonly(readonly);
  csi::v1::NodePublishVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return node().NodePublishVolume(&ctx, req, &resp);
}

grpc::Status HostpathPlugin::unpublish(const std::string& volume_id, const std::filesystem::path& target) {
  csi::v1::NodeUnpublishVolumeRequest req;
  req.set_volume_id(volume_id);
  req.set_target_path(target.string());
  csi::v1::NodeUnpublishVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return node().NodeUnpublishVolume(&ctx, req, &resp);
}

}  // namespace mooring::hostpath
