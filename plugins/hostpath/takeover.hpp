// mooring-hostpath: the hand-over between two copies of the plugin for one node. A rolling
// upgrade starts the new copy beside the old one, and only one of them may touch the node's state
// (mount records, the volume catalogue) at a time: the holder of the node's instance locks. A copy
// that finds them held serves at once what needs no state (Identity, NodeGetInfo, capabilities),
// so the orchestrator can see it healthy and switch its calls to it, and holds every other call
// until it has the locks. The old copy releases them when it exits, after finishing its calls in
// flight. A held call is delayed, never refused, but it still ends at its gRPC deadline: an
// orphan that never exits makes calls time out (naming it), never two copies touch the state.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/support/status.h>

#include "shared/durable/instance_lock.hpp"

namespace mooring::hostpath {

// Whether an RPC needs the node's state, and so the locks: every call but Identity's and the
// answers the flags fix (NodeGetInfo and the capabilities).
bool touches_state(std::string_view rpc);

class Takeover {
 public:
  struct Lock {
    std::filesystem::path path;
    std::string what;  // names the holder in the refusal: "a hostpath node service for node ..."
  };
  // `open_state` loads the state the locks protect; it runs once they are all held, before any
  // held call goes on, and returns an error text or "".
  Takeover(std::vector<Lock> locks, std::function<std::string()> open_state,
           std::chrono::milliseconds poll = std::chrono::milliseconds(5));
  ~Takeover();  // stop(), then joins the waiting thread; releases the locks
  Takeover(const Takeover&) = delete;
  Takeover& operator=(const Takeover&) = delete;

  enum class Start { active, standby, failed };
  // Tries the locks once (in order). active: all held and the state open. standby: another
  // process holds one; call wait_in_background(). failed: error() says why.
  Start start();
  // Standby: polls the locks in a thread of its own until they are held (then opens the state
  // and releases the held calls) or stop(). `done` runs in that thread with "" or the error.
  void wait_in_background(std::function<void(const std::string& error)> done);

  // For every call that touches state: OK at once when active; otherwise blocks until active (OK),
  // the deadline, `cancelled()` or stop(), and returns the status the call ends with instead.
  // After OK the call runs, and the caller must call done() when it ends.
  grpc::Status hold(std::string_view rpc, std::chrono::system_clock::time_point deadline,
                    const std::function<bool()>& cancelled);
  void done();

  // The copy is stopping (SIGTERM). Standby: the wait ends and held calls answer UNAVAILABLE
  // (they did nothing). Active: new calls that touch state answer UNAVAILABLE, the calls running
  // finish (up to `grace`), then the locks are released at once, so the next copy takes over
  // without waiting for this process to exit. Returns the number of calls still running at the
  // end of `grace` (0 normally).
  std::size_t drain(std::chrono::milliseconds grace);
  void stop();

  bool active() const;
  std::string error() const;
  // While standby: the refusal that names who holds the lock ("... is already running (pid N; ...)").
  std::string holder() const;

 private:
  enum class State { standby, active, draining, failed, stopped };
  // Takes the locks not held yet, in order; "" when all are held; `busy` when another holds one.
  std::string take_locks(bool& busy);
  void finish(const std::string& open_error);

  const std::vector<Lock> specs_;
  const std::function<std::string()> open_state_;
  const std::chrono::milliseconds poll_;
  std::vector<durable::InstanceLock> held_;  // touched by start() and then the waiting thread only
  mutable std::mutex mu_;
  std::condition_variable changed_;
  State state_ = State::standby;
  std::string error_;
  std::string holder_;
  std::size_t running_ = 0;  // calls that passed hold() and have not called done()
  std::thread waiter_;       // last: joined first
};

}  // namespace mooring::hostpath
