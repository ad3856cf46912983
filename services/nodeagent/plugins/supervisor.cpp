#include "services/nodeagent/plugins/supervisor.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/process/child_process.hpp"
#include "services/nodeagent/process/proc_stat.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/task_group.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/async/with_timeout.hpp"
#include "shared/csi/capabilities.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/domain/time.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const log::Logger kLog{"supervisor"};

// While waiting for a fresh plugin, look often: a plugin is usually up within milliseconds and
// "healthy within 1 s of start" should not be eaten by our own polling interval.
constexpr auto kStartPollInitial = 20ms;
constexpr auto kStartPollMax = 500ms;
constexpr auto kStableRun = std::chrono::minutes(1);
// An unhealthy plugin is probed this often, not every probe_interval: the moment it answers
// again, the releases waiting for it (here and on the control plane) are woken. A probe of a
// dead socket fails at once, so this costs next to nothing.
constexpr auto kUnhealthyPoll = 200ms;
// A probe given less time than this cannot tell us anything.
constexpr auto kMinProbeBudget = std::chrono::milliseconds(50);

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::vector<PluginKind> kinds_of(PluginRole role) {
  switch (role) {
    case PluginRole::controller: return {PluginKind::controller};
    case PluginRole::node: return {PluginKind::node};
    case PluginRole::monolith: return {PluginKind::controller, PluginKind::node};
  }
  return {};
}

// Runs a launched plugin's process to its end, then wakes its supervisor.
asio::awaitable<void> run_process(std::shared_ptr<ChildProcess> proc, std::shared_ptr<async::WakeSignal> wake) {
  try {
    co_await proc->run();
  } catch (...) {
    wake->notify();
    throw;
  }
  wake->notify();
}

template <class D>
std::chrono::milliseconds ms(D d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

PluginSupervisor::PluginSupervisor(asio::any_io_executor ex, PluginConfig config, SupervisorContext ctx)
    : ex_(ex),
      config_(std::move(config)),
      ctx_(std::move(ctx)),
      fingerprinter_(config_.id, config_.type, ctx_.alloc_id),
      exit_wake_(std::make_shared<async::WakeSignal>(ex)) {
  // A split plugin's controller runs beside its node instance of the same id: its socket (and
  // launch record) live in their own directory.
  auto dir = ctx_.data_dir / "plugins" / config_.id;
  if (config_.type == PluginRole::controller) dir /= "controller";
  socket_path_ = config_.launched() ? (dir / "csi.sock").string() : config_.socket;
}

std::vector<PluginKind> PluginSupervisor::kinds() const { return kinds_of(config_.type); }

PluginSupervisor::~PluginSupervisor() = default;

std::optional<pid_t> PluginSupervisor::pid() const {
  if (process_ && process_->running()) return process_->pid();
  return std::nullopt;
}

void PluginSupervisor::event(std::string message, std::map<std::string, std::string> details) {
  details["plugin_id"] = config_.id;
  details["plugin_type"] = std::string(to_string(config_.type));
  if (!ctx_.alloc_id.empty()) details["alloc_id"] = ctx_.alloc_id;
  ctx_.status.add_event("plugin", std::move(message), std::move(details));
}

void PluginSupervisor::report(const ::mooring::v1::PluginFingerprint& fp) {
  ctx_.status.set_fingerprint(fp);
  set_health(fp.healthy(), fp.health_description());
}

// Events only on a change of the healthy flag (and for the first verdict), so a plugin that
// stays broken for an hour produces one event, not one per probe.
void PluginSupervisor::set_health(bool healthy, const std::string& reason) {
  if (reported_healthy_ == healthy) return;
  reported_healthy_ = healthy;
  if (healthy) {
    kLog.info("plugin became healthy", {{"plugin", config_.id}, {"alloc", ctx_.alloc_id}});
    event("plugin became healthy");
  } else {
    kLog.warn("plugin unhealthy", {{"plugin", config_.id}, {"alloc", ctx_.alloc_id}, {"reason", reason}});
    event("plugin unhealthy: " + reason, {{"reason", reason}});
  }
  // A plugin task's health is news for its allocation too, once it is registered (a failed start
  // is the allocation's own failure event).
  if (ctx_.task_event && generation_ != 0) {
    if (healthy)
      ctx_.task_event("PluginHealthy", "plugin " + config_.id + " became healthy");
    else
      ctx_.task_event("PluginUnhealthy", "plugin " + config_.id + " unhealthy: " + reason);
  }
}

// Also true once the owner stopped the heartbeat: the loops below end as they do on an exit.
bool PluginSupervisor::process_exited() const {
  return heartbeat_stopped_ || (config_.launched() && (!process_ || !process_->running()));
}

std::string PluginSupervisor::exit_reason() const {
  if (process_ && process_->exit_status()) return "plugin process " + process_->exit_status()->describe();
  return "plugin process is not running";
}

// The launch record: "<pid> <start ticks>" of the process this agent launched, next to its socket.
// An agent killed with -9 leaves its plugin running; the next agent finds it here and stops it
// before it launches another, so a node never runs two instances of one plugin.
std::filesystem::path PluginSupervisor::launch_record() const {
  return std::filesystem::path(socket_path_).parent_path() / "process";
}

asio::awaitable<void> PluginSupervisor::stop_leftover() {
  std::error_code ec;
  auto text = durable::read_file(launch_record(), ec);
  if (!text) co_return;
  std::istringstream in(*text);
  pid_t pid = 0;
  std::uint64_t ticks = 0;
  if (!(in >> pid >> ticks) || pid <= 0) co_return;
  const auto alive = [&] { return process_start_ticks(pid) == ticks; };  // the same process, not a reused pid
  if (!alive()) co_return;
  kLog.warn("stopping the plugin process an earlier agent left running",
            {{"plugin", config_.id}, {"pid", static_cast<int>(pid)}});
  ::kill(-pid, SIGTERM);  // its own process group, as launched
  const auto deadline = Clock::now() + config_.stop_timeout;
  while (alive() && Clock::now() < deadline) co_await async::sleep_for(std::chrono::milliseconds(50));
  if (alive()) {
    ::kill(-pid, SIGKILL);
    for (int i = 0; i < 100 && alive(); ++i) co_await async::sleep_for(std::chrono::milliseconds(20));
  }
  event("stopped plugin process " + std::to_string(pid) + " left running by an earlier agent",
        {{"pid", std::to_string(pid)}});
}

asio::awaitable<bool> PluginSupervisor::launch() {
  std::error_code ec;
  const auto dir = std::filesystem::path(socket_path_).parent_path();
  std::filesystem::create_directories(dir, ec);
  if (!ec) std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  co_await stop_leftover();
  std::filesystem::remove(socket_path_, ec);  // a stale socket would look like a live plugin
  ProcessSpec spec;
  spec.name = config_.id;
  spec.command = config_.command;
  spec.args = config_.args;
  spec.env = config_.env;
  spec.env["CSI_ENDPOINT"] = "unix://" + socket_path_;
  auto proc = ChildProcess::spawn(ex_, spec, log_lines("plugin", config_.id));
  if (!proc) {
    const auto reason = "cannot start " + config_.command + ": " + proc.error().message();
    fingerprinter_.mark(false, reason);
    report(fingerprinter_.last());
    co_return false;
  }
  process_ = *proc;
  const auto ticks = process_start_ticks(process_->pid());
  if (auto wec = durable::write_file_atomically(
          launch_record(), std::to_string(process_->pid()) + " " + std::to_string(ticks.value_or(0)) + "\n"))
    kLog.warn("cannot record the plugin's launch", {{"plugin", config_.id}, {"error", wec.message()}});
  kLog.info("plugin launched",
            {{"plugin", config_.id}, {"pid", static_cast<int>(process_->pid())}, {"socket", socket_path_}});
  ctx_.processes.spawn("plugin-process-" + config_.id, run_process(process_, exit_wake_));
  co_return true;
}

asio::awaitable<std::optional<grpc::Status>> PluginSupervisor::probe_once(std::chrono::milliseconds timeout,
                                                                          bool& ready) {
  ::csi::v1::ProbeResponse resp;
  auto st = co_await async::with_timeout(client_->probe(resp), timeout);
  if (st && st->ok()) ready = csi::probe_ready(resp);
  co_return st;
}

// Returns nullopt once the plugin answered Probe with ready, else why it is not healthy.
asio::awaitable<std::optional<std::string>> PluginSupervisor::wait_until_healthy() {
  const auto deadline = Clock::now() + config_.health_timeout;
  auto poll = std::chrono::milliseconds(kStartPollInitial);
  std::string why = "plugin socket " + socket_path_ + " did not appear";
  std::string last_answer;  // the most recent verdict of a Probe that did answer: the best reason
  bool socket_seen = false;
  while (true) {
    const auto gen = exit_wake_->generation();
    if (process_exited()) co_return exit_reason();
    if (!socket_seen && is_socket(socket_path_)) {
      socket_seen = true;
      client_ = ctx_.make_client(config_.id, socket_path_);
    }
    const auto left = ms(deadline - Clock::now());
    if (socket_seen && left >= kMinProbeBudget) {
      bool ready = false;
      const auto probe_timeout = std::min(csi::policy(csi::Rpc::Probe).timeout, left);
      const auto st = co_await probe_once(probe_timeout, ready);
      if (process_exited()) co_return exit_reason();
      if (!st) {
        why = "Probe did not answer within " + std::to_string(probe_timeout.count()) + "ms";
      } else if (!st->ok()) {
        last_answer = "Probe failed: " + csi::status_text(*st);
      } else if (!ready) {
        last_answer = "Probe: plugin reports not ready";
      } else {
        co_return std::nullopt;
      }
    }
    if (Clock::now() >= deadline) co_return last_answer.empty() ? why : last_answer;
    const auto sleep = std::min(poll, ms(deadline - Clock::now()));
    if (co_await async::sleep_for(sleep, exit_wake_.get(), gen) == async::SleepEnd::cancelled)
      throw boost::system::system_error(asio::error::operation_aborted);
    // Until the socket appears, look every kStartPollInitial (a stat): a plugin binds it within
    // milliseconds, and doubling from the start put ~140 ms between a plugin's start and its first
    // Probe. Probes that answer "not ready" back off.
    if (socket_seen) poll = std::min(poll * 2, std::chrono::milliseconds(kStartPollMax));
  }
}

// The heartbeat: probe every probe_interval, full fingerprint every fingerprint_interval and
// whenever the health changes; ends when the process exits or stays unhealthy too long.
asio::awaitable<PluginSupervisor::InstanceEnd> PluginSupervisor::monitor() {
  limits_->wake = exit_wake_;
  if (ctx_.limits) ctx_.limits->watch(config_.id, limits_);
  auto last_full = Clock::time_point::min();
  std::optional<Clock::time_point> unhealthy_since;
  bool healthy = true;
  bool need_full = true;
  while (true) {
    const auto gen = exit_wake_->generation();
    if (process_exited()) co_return InstanceEnd::exited;
    // A RESOURCE_EXHAUSTED answer asked for the plugin's limits now (limits_watch.hpp).
    if (std::exchange(limits_->wanted, false)) need_full = true;
    if (need_full || Clock::now() - last_full >= config_.fingerprint_interval) {
      // Each call inside has its own timeout; this bounds the whole round.
      auto fp = co_await async::with_timeout(fingerprinter_.fingerprint(*client_),
                                             config_.health_timeout + csi::policy(csi::Rpc::Probe).timeout);
      if (process_exited()) co_return InstanceEnd::exited;
      if (!fp) fp = fingerprinter_.mark(false, "fingerprint did not finish in time");
      report(*fp);
      healthy = fp->healthy();
      last_full = Clock::now();
      need_full = false;
    } else {
      bool ready = false;
      const auto st =
          co_await probe_once(std::min(csi::policy(csi::Rpc::Probe).timeout, config_.health_timeout), ready);
      if (process_exited()) co_return InstanceEnd::exited;
      bool now_healthy = st && st->ok() && ready;
      if (now_healthy != healthy) {
        need_full = true;  // fingerprint on change: the full picture, with the reason
        if (!now_healthy) {
          const auto reason = !st         ? std::string("Probe timed out")
                              : !st->ok() ? "Probe failed: " + csi::status_text(*st)
                                          : "Probe: plugin reports not ready";
          report(fingerprinter_.mark(false, reason));
        }
        healthy = now_healthy;
        continue;
      }
    }
    if (healthy) {
      unhealthy_since.reset();
    } else {
      if (!unhealthy_since) unhealthy_since = Clock::now();
      if (config_.launched() && Clock::now() - *unhealthy_since >= config_.health_timeout)
        co_return InstanceEnd::unhealthy;
    }
    const auto interval =
        healthy ? config_.probe_interval : std::min<std::chrono::milliseconds>(config_.probe_interval, kUnhealthyPoll);
    if (co_await async::sleep_for(interval, exit_wake_.get(), gen) == async::SleepEnd::cancelled)
      throw boost::system::system_error(asio::error::operation_aborted);
  }
}

// Stops what is left of an instance (process, client, registration) before a restart.
asio::awaitable<void> PluginSupervisor::end_instance(const std::string& why) {
  if (generation_ != 0) {
    for (const auto kind : kinds_of(config_.type)) ctx_.registry.deregister(kind, config_.id, generation_);
    generation_ = 0;
  }
  client_.reset();
  if (process_ && process_->running()) {
    kLog.info("stopping plugin", {{"plugin", config_.id}, {"reason", why}});
    co_await process_->stop(config_.stop_timeout);
  }
}

asio::awaitable<void> PluginSupervisor::run() {
  unsigned failures = 0;  // consecutive instances that did not stay up; drives the backoff
  // "starting" is reported (the control plane sees the plugin) but is no verdict worth an event.
  ctx_.status.set_fingerprint(fingerprinter_.mark(false, "starting"));
  while (true) {
    if (failures > 0) {
      // A plugin on an external socket has nothing to restart: it is looked for again soon, not
      // after a growing backoff, so it is healthy within moments of coming back.
      const auto delay =
          config_.launched() ? ctx_.restart_backoff.delay(failures - 1) : std::chrono::milliseconds(kStartPollMax);
      kLog.info("restarting plugin after backoff", {{"plugin", config_.id}, {"delay", delay}});
      if (co_await async::sleep_for(delay) == async::SleepEnd::cancelled) co_return;
    }
    if (config_.launched()) {
      if (!co_await launch()) {
        ++failures;
        continue;
      }
      if (launches_++ > 0) {
        restarts_ = launches_ - 1;
        event("plugin restarted", {{"restarts", std::to_string(restarts_)}});
      }
    } else {
      client_ = ctx_.make_client(config_.id, socket_path_);
    }

    auto unhealthy = co_await wait_until_healthy();
    if (unhealthy) {
      *unhealthy += " (within health_timeout " + std::to_string(config_.health_timeout.count()) + "ms)";
      fingerprinter_.mark(false, *unhealthy);
      report(fingerprinter_.last());
      if (!config_.launched()) {
        // Nothing to restart: keep looking for the sidecar's plugin.
        ++failures;
        client_.reset();
        continue;
      }
      co_await end_instance(*unhealthy);
      ++failures;
      continue;
    }
    if (const auto failed = co_await register_instance()) {
      co_await end_instance(*failed);
      ++failures;
      continue;
    }

    const auto healthy_at = Clock::now();
    const auto end = co_await monitor();
    // An instance that ran well for a while starts the backoff over; one that keeps crashing
    // right after start backs off further.
    failures = Clock::now() - healthy_at > kStableRun ? 1 : failures + 1;
    const std::string why = end == InstanceEnd::exited ? exit_reason()
                                                       : "unhealthy for longer than health_timeout: " +
                                                             fingerprinter_.last().health_description();
    report(fingerprinter_.mark(false, why));
    co_await end_instance(why);
  }
}

asio::awaitable<std::optional<std::string>> PluginSupervisor::register_instance() {
  ::csi::v1::GetPluginInfoResponse info;
  auto st = co_await async::with_timeout(client_->get_plugin_info(info), csi::policy(csi::Rpc::GetPluginInfo).timeout);
  if (!st || !st->ok()) {
    const auto reason = "GetPluginInfo failed: " + (st ? csi::status_text(*st) : std::string("timed out"));
    report(fingerprinter_.mark(false, reason));
    co_return reason;
  }
  provider_ = info.name();
  version_ = info.vendor_version();
  generation_ = ctx_.registry.register_plugin(
      kinds_of(config_.type),
      PluginRegistration{config_.id, socket_path_, provider_, version_, config_.launched(), ctx_.alloc_id});
  co_return std::nullopt;
}

bool PluginSupervisor::register_again() {
  if (generation_ == 0) return false;
  generation_ = ctx_.registry.register_plugin(
      kinds_of(config_.type),
      PluginRegistration{config_.id, socket_path_, provider_, version_, config_.launched(), ctx_.alloc_id});
  ctx_.status.set_fingerprint(fingerprinter_.last());
  ctx_.status.prefer(config_.id, ctx_.alloc_id);  // the node's one fingerprint for the id is this one again
  return true;
}

asio::awaitable<std::optional<std::string>> PluginSupervisor::adopt() {
  ctx_.status.set_fingerprint(fingerprinter_.mark(false, "starting"));
  const auto not_healthy = [&](const std::string& why) {
    const auto reason =
        "plugin did not become healthy within " + domain::format_duration(config_.health_timeout) + ": " + why;
    report(fingerprinter_.mark(false, reason));
    return reason;
  };
  if (auto unhealthy = co_await wait_until_healthy()) co_return not_healthy(*unhealthy);
  // Fingerprinted before it is registered, and registered and reported healthy in one step: the
  // moment it replaces an older instance in the registry (an upgrade step), it is already the
  // healthy instance that serves calls - never a registered one still "starting".
  auto fp = co_await async::with_timeout(fingerprinter_.fingerprint(*client_),
                                         config_.health_timeout + csi::policy(csi::Rpc::Probe).timeout);
  if (!fp) co_return not_healthy("fingerprint did not finish in time");
  if (!fp->healthy()) co_return not_healthy(fp->health_description());
  provider_ = fp->provider();
  version_ = fp->version();
  generation_ = ctx_.registry.register_plugin(
      kinds_of(config_.type),
      PluginRegistration{config_.id, socket_path_, provider_, version_, config_.launched(), ctx_.alloc_id});
  report(*fp);
  co_return std::nullopt;
}

asio::awaitable<void> PluginSupervisor::heartbeat() {
  if (generation_ == 0 || heartbeat_stopped_) co_return;
  (void)co_await monitor();
}

void PluginSupervisor::stop_heartbeat() {
  heartbeat_stopped_ = true;
  exit_wake_->notify();
}

asio::awaitable<void> PluginSupervisor::final_fingerprint(std::string reason) {
  if (client_) {
    client_->close(reason);
    auto fp = co_await async::with_timeout(fingerprinter_.fingerprint(*client_), 2s);
    if (!fp || fp->healthy()) fp = fingerprinter_.mark(false, reason);
    report(*fp);
  } else {
    report(fingerprinter_.mark(false, reason));
  }
}

asio::awaitable<void> PluginSupervisor::stop_and_deregister() {
  const bool was_registered = generation_ != 0;
  co_await end_instance("agent shutting down");
  if (was_registered) event("plugin deregistered");
}

}  // namespace mooring::nodeagent
