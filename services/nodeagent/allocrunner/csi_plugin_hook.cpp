#include "services/nodeagent/allocrunner/csi_plugin_hook.hpp"

#include <system_error>

#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;

const log::Logger kLog{"csi-plugin-hook"};

}  // namespace

domain::Expected<fs::path> plugin_socket_path(const fs::path& alloc_dir, const std::string& mount_dir,
                                              const fs::path& short_root, const std::string& alloc_id) {
  const fs::path rel = fs::path(mount_dir.empty() ? std::string("csi") : mount_dir).lexically_normal();
  if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
    return domain::error("CSIPlugin.MountDir " + mount_dir + " must be a directory inside the allocation's");
  auto in_alloc = alloc_dir / rel / "csi.sock";
  if (in_alloc.string().size() <= kMaxSocketPath) return in_alloc;
  // A deep data dir: the allocation's directory would not fit a unix socket's sun_path, so the
  // socket goes to a short directory of the agent's own, named after the allocation.
  auto in_short = short_root / alloc_id / "csi.sock";
  if (in_short.string().size() <= kMaxSocketPath) return in_short;
  return domain::error("the plugin socket path " + in_short.string() + " is longer than a unix socket allows (" +
                       std::to_string(kMaxSocketPath) + " bytes): use a shorter agent data dir");
}

CsiPluginHook::CsiPluginHook(domain::Allocation alloc, fs::path alloc_dir, fs::path short_root,
                             PluginTaskSupervision& plugins, PluginTaskEvents events)
    : alloc_(std::move(alloc)),
      alloc_dir_(std::move(alloc_dir)),
      short_root_(std::move(short_root)),
      plugins_(plugins),
      events_(std::move(events)) {}

domain::Status CsiPluginHook::prepare() {
  const auto& plugin = *alloc_.task->csi_plugin;
  auto path = plugin_socket_path(alloc_dir_, plugin.mount_dir, short_root_, alloc_.id);
  if (!path) return domain::error(path.error());
  std::error_code ec;
  const auto dir = path->parent_path();
  fs::create_directories(dir, ec);
  if (!ec) fs::permissions(dir, fs::perms::owner_all, ec);  // only root (the agent, the plugin) reaches the socket
  if (ec) return domain::error("cannot prepare the plugin socket directory " + dir.string() + ": " + ec.message());
  // No stale socket is removed here: the directory is the allocation's own, and after an agent
  // restart the socket belongs to the plugin task that still runs.
  socket_path_ = path->string();
  return {};
}

boost::asio::awaitable<domain::Status> CsiPluginHook::prerun(std::map<std::string, std::string>& task_env) {
  if (!alloc_.task || !alloc_.task->csi_plugin) co_return domain::Status{};
  if (auto st = prepare(); !st) co_return st;
  task_env["CSI_ENDPOINT"] = "unix://" + socket_path_;
  kLog.info("plugin task prepared",
            {{"alloc", alloc_.id}, {"plugin", alloc_.task->csi_plugin->id}, {"socket", socket_path_}});
  co_return domain::Status{};
}

boost::asio::awaitable<domain::Status> CsiPluginHook::poststart() {
  if (!alloc_.task || !alloc_.task->csi_plugin || socket_path_.empty()) co_return domain::Status{};
  co_return co_await plugins_.supervise(alloc_.id, alloc_.create_index, *alloc_.task->csi_plugin, socket_path_,
                                        events_);
}

void CsiPluginHook::postrun() {
  // Also when this run never supervised it (the task ended while the agent was down): the
  // registry may still hold the instance an earlier run registered.
  if (!alloc_.task || !alloc_.task->csi_plugin || stopped_) return;
  stopped_ = true;
  plugins_.stopped(alloc_.id);
}

}  // namespace mooring::nodeagent
