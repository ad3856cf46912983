#include "services/controlplane/ha/leadership.hpp"

#include <unistd.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/state/fenced_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/task_group.hpp"
#include "shared/log/async_writer.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::ha {
namespace {

namespace asio = boost::asio;

const log::Logger logger{"controlplane"};

// A leader that lost its lease steps down by starting over as this same program with the same
// arguments: nothing of its memory (state read while leading, GC timers, in-flight calls)
// survives into the standby, which is what a restart gives and what the tests pin. Kubernetes'
// controller-manager exits for the same reason; re-executing keeps `make run-ha` whole without a
// supervisor. Every descriptor is closed first, so the ports are free for the new process.
//
// A leader that steps down because the state would not load (its keyring lacks the state's root
// key, say) would win the next election as likely as any other member and fail again, leaving the
// cluster leaderless over and over. It counts such restarts in kFailedLoads (carried across the
// exec) and the next standby holds back from the election for lease × 2^(n-1), at most 32 s; a
// load that succeeds clears the count. Every other reason starts the standby with no hold-back.
constexpr const char* kFailedLoads = "MOORING_FAILED_LOADS";

int failed_loads() {
  const char* v = std::getenv(kFailedLoads);
  return v == nullptr ? 0 : std::clamp(std::atoi(v), 0, 64);
}

}  // namespace

std::chrono::milliseconds campaign_delay(std::chrono::milliseconds lease) {
  const int n = failed_loads();
  if (n == 0) return std::chrono::milliseconds{0};
  return std::min<std::chrono::milliseconds>(lease * (1 << std::min(n - 1, 5)), std::chrono::seconds(32));
}

[[noreturn]] void restart_as_standby(char** argv, const std::string& why, bool failed_load) {
  logger.error("stepping down: this control plane is no longer the leader; restarting as a standby", {{"reason", why}});
  if (failed_load) {
    ::setenv(kFailedLoads, std::to_string(failed_loads() + 1).c_str(), 1);
  } else {
    ::unsetenv(kFailedLoads);
  }
  log::flush();  // the AsyncWriter's queue would not survive the exec
  std::cout.flush();
  std::cerr.flush();
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execv("/proc/self/exe", argv);
  logger.error("cannot restart (exiting instead)", {{"error", std::string(std::strerror(errno))}});
  log::flush();
  std::_Exit(1);
}

Leadership::Leadership(LeadershipParts parts, ElectionOptions options)
    : parts_(std::move(parts)), lease_(options.lease) {
  auto post = [ex = parts_.executor](std::function<void()> f) { asio::post(ex, std::move(f)); };
  election_ = std::make_unique<LeaderElection>(
      std::move(options),
      ElectionEvents{
          .elected = [this, post](LeaderFence fence) { post([this, fence = std::move(fence)] { elected(fence); }); },
          .lost = [post, argv = parts_.argv](
                      const std::string& why) { post([argv, why] { restart_as_standby(argv, why); }); },
          .degraded = [this, post](const std::string& why) { post([this, why] { degrade(why); }); },
          .restored = [this,
                       post] { post([this] { parts_.tasks.spawn("resume-leading", [this] { return resume(); }); }); },
          // Writes and calls out are held meanwhile (front.hpp); reads are answered from memory.
          .unconfirmed = [this, post] { post([this] { parts_.store.set_reads_from_memory(true); }); },
          .confirmed = [this, post] { post([this] { parts_.store.set_reads_from_memory(false); }); },
          .lease_changed = [this, post] { post([this] { hold_->wake(); }); },
      });
  hold_ = std::make_unique<LeaseHold>(parts_.executor, *election_,
                                      [&store = parts_.store] { return !store.read_only() && !store.broken(); });
}

Leadership::~Leadership() = default;

void Leadership::elected(LeaderFence fence) {
  epoch_ = domain::LeaderEpoch{.cluster = fence.cluster_id, .revision = fence.create_revision};
  parts_.backend.set_fence(std::move(fence));
  if (auto st = parts_.load_state(); !st) {
    election_->stop();  // hand the lease back: a member that can load leads at once
    restart_as_standby(parts_.argv, "elected, but the state does not load: " + st.error(), true);
  }
  ::unsetenv(kFailedLoads);
  serving_ = true;
  parts_.lead();
}

// Degraded (etcd has no quorum or cannot be reached; lease_health.hpp): the REST front and the
// agent service refuse writes by asking the election directly; here the store refuses commits
// and the router every call to a node (pause_calls), so GC and reconcilers make no call whose
// result could not be recorded. A write in flight at that moment may still commit when the quorum returns: the
// state is reloaded before anything is written again.
void Leadership::degrade(const std::string& why) {
  auto& store = parts_.store;
  store.set_read_only("etcd has no quorum or cannot be reached (" + why +
                      "): writes are refused until it answers "
                      "again; nothing was changed");
  parts_.pause_calls("etcd has no quorum or cannot be reached: no call is made whose result could not be recorded");
  if (store.flushing() || store.durable_index() < store.index()) reload_on_resume_ = true;
}

asio::awaitable<void> Leadership::resume() {
  auto& store = parts_.store;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  while (store.flushing()) {  // the backend is the writer thread's until its answer lands
    pause.expires_after(std::chrono::milliseconds(20));
    co_await pause.async_wait(asio::use_awaitable);
  }
  if (election_->degraded()) co_return;  // cut off again meanwhile: the next restore resumes
  if (reload_on_resume_ || store.broken() || parts_.backend.needs_reload()) {
    // Off the executor: reads go on from memory (the last committed copy) while etcd sends the state.
    if (auto st = co_await store.reload_in_background(); !st)
      restart_as_standby(parts_.argv, "etcd answers again, but the state does not reload: " + st.error());
    logger.info("state reloaded after writes of unknown outcome", {{"index", store.index()}});
    if (election_->degraded()) co_return;  // cut off again meanwhile: the next restore resumes
  }
  reload_on_resume_ = false;
  store.set_read_only(std::nullopt);
  hold_->wake();  // a write held meanwhile may go once the state takes writes
  parts_.pause_calls(std::nullopt);
  parts_.resumed();
  logger.info("leading again: writes, claim GC and reconcilers resume", {{"index", store.index()}});
}

void Leadership::store_broken(const std::string& why) {
  reload_on_resume_ = true;
  parts_.tasks.spawn("broken-state", [this, why]() -> asio::awaitable<void> {
    asio::steady_timer grace(co_await asio::this_coro::executor, 2 * lease_);
    co_await grace.async_wait(asio::use_awaitable);
    if (parts_.store.broken() && !election_->degraded())
      restart_as_standby(parts_.argv, "the state is not writable: " + why);
  });
}

}  // namespace mooring::controlplane::ha
