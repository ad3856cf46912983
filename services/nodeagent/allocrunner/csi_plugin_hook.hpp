// The CSI plugin hook (Nomad's csi_plugin_supervisor hook) of an allocation whose task is a CSI
// plugin (Task.CSIPlugin). Prerun prepares the socket directory, <alloc dir>/<MountDir>, and gives
// the task CSI_ENDPOINT=unix://<dir>/csi.sock; Poststart waits until the plugin is healthy and
// registered (an error fails the allocation); Postrun hands it back to the plugin supervision,
// which runs the final fingerprint and deregisters the instance when no volume needs it.
#pragma once

#include <filesystem>
#include <string>

#include "services/nodeagent/allocrunner/alloc_hook.hpp"
#include "services/nodeagent/allocrunner/plugin_task_supervision.hpp"
#include "shared/domain/allocation.hpp"

namespace mooring::nodeagent {

// A unix socket path must fit sun_path (108 bytes with its NUL); 20 of them are left for plugins
// that bind a temporary name beside the socket and rename it into place (mooring-hostpath does).
inline constexpr std::size_t kMaxSocketPath = 87;

// Where the plugin task's socket lives: <alloc_dir>/<mount_dir>/csi.sock, or, when that path is
// too long for a unix socket (a deep data dir), <short_root>/<alloc id>/csi.sock. An error when
// mount_dir leaves the allocation's directory or neither path fits. Pure, for tests.
domain::Expected<std::filesystem::path> plugin_socket_path(const std::filesystem::path& alloc_dir,
                                                           const std::string& mount_dir,
                                                           const std::filesystem::path& short_root,
                                                           const std::string& alloc_id);

class CsiPluginHook final : public AllocHook {
 public:
  // `alloc_dir`: the allocation's directory; `short_root`: a short directory under the agent's
  // data dir for sockets whose path would be too long there.
  CsiPluginHook(domain::Allocation alloc, std::filesystem::path alloc_dir, std::filesystem::path short_root,
                PluginTaskSupervision& plugins, PluginTaskEvents events);

  std::string_view name() const override { return "csi_plugin"; }
  boost::asio::awaitable<domain::Status> prerun(std::map<std::string, std::string>& task_env) override;
  boost::asio::awaitable<domain::Status> poststart() override;
  void postrun() override;

  const std::string& socket_path() const { return socket_path_; }

 private:
  domain::Status prepare();

  domain::Allocation alloc_;
  std::filesystem::path alloc_dir_;
  std::filesystem::path short_root_;
  PluginTaskSupervision& plugins_;
  PluginTaskEvents events_;
  std::string socket_path_;
  bool stopped_ = false;  // Postrun told the supervision (once)
};

}  // namespace mooring::nodeagent
