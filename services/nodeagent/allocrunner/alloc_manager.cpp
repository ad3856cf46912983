#include "services/nodeagent/allocrunner/alloc_manager.hpp"

#include <algorithm>

#include "services/nodeagent/allocrunner/csi_plugin_hook.hpp"
#include "services/nodeagent/allocrunner/volume_mounter.hpp"
#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/ids.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

const log::Logger kLog{"allocs"};

std::chrono::milliseconds stop_after(const AllocRunner& r) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(r.state().alloc.stop_after_client_disconnect);
}

// The deadline of an allocation with StopAfterClientDisconnect, from the last heartbeat answered.
void keep_deadline(AllocRunner& r, const Heard& heard) {
  if (!r.finished() && stop_after(r).count() > 0) r.keep(disconnect_deadline(heard, stop_after(r), r.kill_timeout()));
}

}  // namespace

AllocManager::AllocManager(asio::any_io_executor ex, ControlPlaneCalls& controlplane, VolumeMounter& mounter,
                           AllocStatusSink& status, AllocManagerOptions options)
    : ex_(ex),
      controlplane_(controlplane),
      mounter_(mounter),
      status_(status),
      options_(std::move(options)),
      store_(options_.state_dir),
      runs_(ex, "alloc-runners") {
  options_.csi.node_id = options_.node_id;
}

AllocManager::~AllocManager() { runs_.cancel(); }

AllocRunner* AllocManager::runner(const std::string& alloc_id) {
  auto it = runners_.find(alloc_id);
  return it == runners_.end() ? nullptr : it->second.get();
}

std::vector<std::string> AllocManager::alloc_ids() const {
  std::vector<std::string> out;
  for (const auto& [id, _] : runners_) out.push_back(id);
  return out;
}

AllocRunner& AllocManager::start_runner(AllocState state) {
  const std::string id = state.alloc.id;
  const auto claimed = state.claimed_volumes;
  auto runner = std::make_unique<AllocRunner>(ex_, std::move(state), store_, status_, options_.runner);
  AllocRunner* r = runner.get();
  auto csi = options_.csi;
  if (options_.runner.walls) csi.volume_group = volume_group_for(r->state().alloc, options_.runner.walls->rules);
  r->add_hook(std::make_unique<CsiHook>(
      r->state().alloc, controlplane_, mounter_, std::move(csi),
      [r](std::string type, std::string message) { r->emit(std::move(type), std::move(message)); }, claimed,
      [r](const std::string& volume_id) { return r->note_claim(volume_id); }));
  const auto& task = r->state().alloc.task;
  if (options_.plugin_supervision && task && task->csi_plugin) {
    auto dir = store_.alloc_dir(id);
    r->add_hook(std::make_unique<CsiPluginHook>(
        r->state().alloc, dir ? *dir : store_.dir() / id, options_.plugin_socket_root, *options_.plugin_supervision,
        [r](std::string type, std::string message) { r->emit(std::move(type), std::move(message)); }));
  }
  // A task started before the next heartbeat is kept from its start.
  if (heard_) keep_deadline(*r, *heard_);
  runners_[id] = std::move(runner);
  runs_.spawn("alloc " + id, [r]() { return r->run(); });
  return *r;
}

void AllocManager::restore() {
  for (auto& state : store_.load_all()) {
    if (runners_.contains(state.alloc.id)) continue;
    kLog.info("restoring an allocation from before the restart",
              {{"alloc", state.alloc.id}, {"client_status", domain::to_string(state.client_status)}});
    start_runner(std::move(state));
  }
}

void AllocManager::apply(const std::vector<domain::Allocation>& allocs) {
  std::map<std::string, const domain::Allocation*> listed;
  for (const auto& a : allocs) listed[a.id] = &a;
  apply_listed(listed, {});
}

void AllocManager::fill_watch_request(::mooring::v1::WatchAllocationsRequest& req) const {
  req.set_node_id(options_.node_id);
  req.set_min_index(watched_.index());
  req.set_incarnation(watched_.incarnation());
  req.set_wait_ms(options_.watch_wait.count());
  // A restored allocation still waiting for its SecretEnv must get its body in full.
  const auto refetch = [this](const std::string& id) {
    const auto it = runners_.find(id);
    return it != runners_.end() && it->second->state().secret_env_pending;
  };
  auto& known = *req.mutable_known();
  for (const auto& [id, modify_index] : watched_.known(refetch)) known[id] = modify_index;
}

bool AllocManager::apply(const ::mooring::v1::WatchAllocationsRequest& req,
                         const ::mooring::v1::WatchAllocationsResponse& resp) {
  WatchAnswer answer{.index = resp.index(), .incarnation = resp.incarnation()};
  for (const auto& p : resp.allocations()) {
    auto a = domain::from_proto(p);
    if (!a) {
      kLog.error("allocation from the control plane ignored", {{"alloc", p.id()}, {"error", a.error()}});
      continue;
    }
    answer.changed.push_back(std::move(*a));
  }
  for (const auto& u : resp.unchanged()) answer.unchanged.emplace_back(u.id(), u.modify_index());
  const std::map<std::string, std::uint64_t> asked(req.known().begin(), req.known().end());
  const auto before = watched_.index();
  const auto before_incarnation = watched_.incarnation();
  auto listed = watched_.take(std::move(answer), asked);
  if (!listed) {
    kLog.warn("watch answer refused; asking again for every allocation in full", {{"error", listed.error()}});
    return false;
  }
  if (before_incarnation != 0 && resp.incarnation() != before_incarnation)
    kLog.info(
        "the control plane's state was loaded again (restart, restore or another leader); every "
        "allocation came in full",
        {{"old", static_cast<int64_t>(before)}, {"new", static_cast<int64_t>(resp.index())}});
  else if (resp.index() < before)
    kLog.warn("allocation index went backwards (control plane state reset?); starting over",
              {{"old", static_cast<int64_t>(before)}, {"new", static_cast<int64_t>(resp.index())}});
  apply_listed(listed->all, listed->unchanged);
  return true;
}

void AllocManager::apply_listed(const std::map<std::string, const domain::Allocation*>& all,
                                const std::set<std::string>& unchanged) {
  if (shut_down_) return;
  std::map<std::string, const domain::Allocation*> listed;
  for (const auto& [id, a] : all) {
    if (!a->node_id.empty() && a->node_id != options_.node_id) continue;
    listed[id] = a;
  }
  for (const auto& [id, a] : listed) {
    if (auto* r = runner(id)) {
      // An unchanged one is the body the runner took before: nothing to copy or compare.
      if (!r->finished() && !unchanged.contains(id)) r->update(*a);
      continue;
    }
    if (domain::is_terminal(*a)) continue;
    if (draining_) continue;  // picked up (or reported) by the next run of the agent
    if (auto st = domain::validate_allocation_id(id); !st) {
      kLog.error("allocation with an invalid id ignored", {{"error", st.error()}});
      continue;
    }
    if (a->desired_status == domain::DesiredStatus::stop) {
      // Never started here (or its state was lost): nothing runs, so it is complete; the control
      // plane can release its claims. Mounts it may have left are released by the volume
      // manager's resume after a restart.
      status_.report(id, domain::ClientStatus::complete,
                     {{domain::now(), "Terminated", "allocation stopped before it ran on this node"}});
      continue;
    }
    AllocState state;
    state.alloc = *a;
    state.client_status = domain::ClientStatus::pending;
    kLog.info("new allocation", {{"alloc", id}, {"name", a->name}});
    start_runner(std::move(state));
  }
  collect_finished(listed);
}

void AllocManager::collect_finished(const std::map<std::string, const domain::Allocation*>& listed) {
  for (auto it = runners_.begin(); it != runners_.end();) {
    auto& r = *it->second;
    const auto l = listed.find(it->first);
    const bool gone = l == listed.end();
    if (r.finished() && (gone || domain::is_terminal(*l->second))) {
      kLog.info("allocation done; removing its state", {{"alloc", r.id()}});
      r.destroy();
      it = runners_.erase(it);
      continue;
    }
    if (!r.finished() && gone) r.stop("allocation no longer assigned to this node");
    ++it;
  }
}

asio::awaitable<void> AllocManager::watch() {
  unsigned failures = 0;
  while (true) {
    ::mooring::v1::WatchAllocationsRequest req;
    fill_watch_request(req);
    ::mooring::v1::WatchAllocationsResponse resp;
    const auto started = Clock::now();
    // Read before the call: the control plane coming back while it is in flight still ends the wait.
    const auto back_gen = options_.controlplane_back ? options_.controlplane_back->generation() : 0;
    const auto st = co_await controlplane_.watch_allocations(req, resp);
    if (!st.ok()) {
      const auto delay = options_.watch_backoff.delay(failures++);
      // At start the watch runs before the first registration is answered: the control plane
      // does not know the node yet (NOT_FOUND), and the registration wakes the watch at once.
      if (st.error_code() == grpc::StatusCode::NOT_FOUND && failures == 1)
        kLog.info("waiting for this node's registration before watching allocations", {{"error", st.error_message()}});
      else if (failures == 1 || failures % 10 == 0)
        kLog.warn("watching allocations failed; allocations keep running; retrying",
                  {{"error", st.error_message()}, {"code", static_cast<int>(st.error_code())}, {"delay", delay}});
      const auto slept = co_await async::sleep_for(delay, options_.controlplane_back, back_gen);
      if (slept == async::SleepEnd::cancelled) co_return;
      continue;
    }
    if (failures > 0) kLog.info("watching allocations again");
    failures = 0;
    const auto before = last_index();
    // Refused (false): nothing changed, and the next request is a first look.
    const bool progressed = apply(req, resp) && resp.index() != before;
    // A control plane that answers at once with nothing new (or nothing usable) must not make
    // this a busy loop.
    if (!progressed && Clock::now() - started < std::chrono::milliseconds(100)) {
      const auto slept = co_await async::sleep_for(std::chrono::seconds(1));
      if (slept == async::SleepEnd::cancelled) co_return;
    }
  }
}

void AllocManager::heard(const Heard& heard) {
  heard_ = heard;
  for (auto& [id, r] : runners_) keep_deadline(*r, heard);
}

void AllocManager::check_disconnect(Clock::time_point now, Clock::duration disconnected_for) {
  for (auto& [id, r] : runners_) {
    if (r->finished() || r->stop_requested()) continue;
    const auto limit = stop_after(*r);
    if (limit.count() <= 0) continue;
    std::optional<std::chrono::milliseconds> grace;
    if (heard_) {
      const auto deadline = disconnect_deadline(*heard_, limit, r->kill_timeout());
      if (now < deadline.term_at) continue;
      grace =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::max(deadline.kill_at - now, Clock::duration()));
      disconnected_for = now - heard_->sent;
    } else if (disconnected_for <= limit) {
      continue;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(disconnected_for).count();
    r->stop("no contact with the control plane for " + std::to_string(secs) + "s (stop_after_client_disconnect " +
                domain::format_duration(limit) + ")",
            grace);
  }
}

asio::awaitable<void> AllocManager::watch_disconnect(DisconnectedFor disconnected_for) {
  while (true) {
    const auto slept = co_await async::sleep_for(options_.disconnect_check_interval);
    if (slept == async::SleepEnd::cancelled) co_return;
    check_disconnect(Clock::now(), disconnected_for());
  }
}

void AllocManager::stop_all(const std::string& reason) {
  draining_ = true;
  for (auto& [id, r] : runners_) {
    if (!r->finished()) r->stop(reason);
  }
}

bool AllocManager::all_finished() const {
  return std::all_of(runners_.begin(), runners_.end(), [](const auto& kv) { return kv.second->finished(); });
}

asio::awaitable<void> AllocManager::shutdown() {
  if (shut_down_) co_return;
  shut_down_ = true;
  for (auto& [id, r] : runners_) r->shutdown();
  runs_.cancel();
  co_await runs_.join();
}

}  // namespace mooring::nodeagent
