// What the agent remembers of each allocation across restarts, one directory per allocation under
// {data_dir}/allocs/{alloc_id}/: state.json (written atomically at every step of the runner) and
// the task's stdout/stderr files. A restarted agent re-creates a runner from each state file: it
// re-adopts a task that still runs, restores the mounts, and finishes what a stopped allocation
// still owes (Postrun, the final status report).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/task_process.hpp"
#include "shared/async/serial_worker.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/result.hpp"

namespace mooring::nodeagent {

struct AllocState {
  domain::Allocation alloc;  // the latest version the control plane sent
  domain::ClientStatus client_status = domain::ClientStatus::pending;
  bool task_started = false;  // never start a task twice: a restart re-adopts or reports
  // The start's intent, on disk before the spawn: the task carries it in its environment
  // (kLaunchIdEnv), so a restart that finds it set without a pid looks for that process instead
  // of starting a second copy (a crash between the spawn and the pid's write).
  std::string launch_id;
  std::optional<TaskHandle> task;            // set while the task runs
  std::string task_result;                   // how the task ended ("exited with code 0", ...)
  std::string stop_reason;                   // non-empty once a stop was asked (control plane, disconnect)
  bool postrun_done = false;                 // the volumes were handed to the volume manager
  std::vector<std::string> claimed_volumes;  // volume ids claimed (or possibly claimed)
  // Task.SecretEnv never reaches the disk (the file says only that it was withheld): a state read
  // back has none, and its task is not started before the control plane sends the allocation
  // again (AllocRunner::update).
  bool secret_env_pending = false;
  bool operator==(const AllocState&) const = default;
};

// The state file's text, without Task.SecretEnv.
std::string encode(const AllocState& state);
domain::Expected<AllocState> decode_alloc_state(const std::string& text);

// The runners write through submit(): a writer thread owned by the store does the disk work
// (encode, write, fdatasync), so the agent's one executor thread never waits on a flush while
// other allocations' steps queue behind it. Writes of one allocation land in submission order;
// a state submitted while an older one of the same allocation still waits replaces it (only the
// newest matters). Whatever leaves the agent because of a state (a claim, a status report) waits
// for durable() first, so nothing is announced that a crash could take back.
class AllocStateStore {
 public:
  explicit AllocStateStore(std::filesystem::path dir);
  // Writes what is still queued, then stops the writer thread.
  ~AllocStateStore();
  AllocStateStore(const AllocStateStore&) = delete;
  AllocStateStore& operator=(const AllocStateStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // {dir}/{alloc_id}; the id is validated so it cannot escape the directory.
  domain::Expected<std::filesystem::path> alloc_dir(const std::string& alloc_id) const;

  // On the caller's thread. Not for an allocation that also has submitted writes.
  domain::Status save(const AllocState& state);
  // Removes the allocation's directory (state and task output), on the caller's thread.
  domain::Status remove(const std::string& alloc_id);
  // Every state on disk. A file that cannot be read is logged and left in place for an operator.
  std::vector<AllocState> load_all() const;

  // Queued for the writer thread; a failure is logged there (the runner carries on: the
  // allocation matters more than its restart record).
  void submit(const AllocState& state);
  void submit_remove(const std::string& alloc_id);
  // Queues another durable write of the agent's on the same thread, so durable() covers it too
  // (the pending status reports). `key` names the file: a write queued while an older one of the
  // same key has not started replaces it. Queued as "/<key>", so it never meets an allocation id.
  void submit_write(const std::string& key, std::function<void()> write);
  // Completes once everything submitted before the call is written (or failed and logged).
  // Not cancellable: it lasts one queue of writes.
  boost::asio::awaitable<void> durable();
  // The same, blocking the caller (tests).
  void wait_durable();
  // durable(), then `job` on the writer thread: for a blocking step that must follow the writes
  // and should not hold up the executor (starting a task: posix_spawn waits for the exec).
  boost::asio::awaitable<void> after_durable(std::function<void()> job);

 private:
  std::filesystem::path dir_;
  std::unique_ptr<async::SerialWorker> writer_;  // last: drains the queue while the rest lives
};

}  // namespace mooring::nodeagent
