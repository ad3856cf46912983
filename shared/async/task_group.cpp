#include "shared/async/task_group.hpp"

#include "shared/async/wake_signal.hpp"
#include "shared/async/with_timeout.hpp"
#include "shared/log/log.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/system_error.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace mooring::async {

namespace asio = boost::asio;

namespace {
const log::Logger kLog{"task-group"};
}  // namespace

struct TaskGroup::State {
  struct Child {
    std::string name;
    asio::cancellation_signal signal;
    bool finished = false;
  };

  State(asio::any_io_executor ex, std::string group_name) : name(std::move(group_name)), changed(std::move(ex)) {}

  std::string name;
  std::map<std::uint64_t, std::shared_ptr<Child>> children;
  std::uint64_t next_id = 0;
  bool cancelled = false;
  WakeSignal changed;  // notified whenever a child finishes
};

TaskGroup::TaskGroup(asio::any_io_executor executor, std::string name)
    : executor_(executor), state_(std::make_shared<State>(executor, std::move(name))) {}

TaskGroup::~TaskGroup() { cancel(); }

bool TaskGroup::spawn(std::string name, asio::awaitable<void> task) {
  return spawn(std::move(name), [task = std::make_shared<asio::awaitable<void>>(std::move(task))]() mutable {
    return std::move(*task);
  });
}

bool TaskGroup::spawn(std::string name, std::function<asio::awaitable<void>()> make_task) {
  if (state_->cancelled) {
    kLog.debug("task refused: group is cancelled", {{"group", state_->name}, {"task", name}});
    return false;
  }
  const auto id = state_->next_id++;
  auto child = std::make_shared<State::Child>();
  child->name = std::move(name);
  state_->children.emplace(id, child);

  // The completion handler owns the shared state, so it stays valid even if the TaskGroup
  // object is gone by the time the child finishes.
  asio::co_spawn(
      executor_, std::move(make_task),
      asio::bind_cancellation_slot(child->signal.slot(), [state = state_, id, child](std::exception_ptr error) {
        child->finished = true;
        if (error) {
          try {
            std::rethrow_exception(error);
          } catch (const boost::system::system_error& e) {
            if (e.code() == asio::error::operation_aborted) {
              kLog.debug("task cancelled", {{"group", state->name}, {"task", child->name}});
            } else {
              kLog.error("task failed", {{"group", state->name}, {"task", child->name}, {"error", e.what()}});
            }
          } catch (const std::exception& e) {
            kLog.error("task failed", {{"group", state->name}, {"task", child->name}, {"error", e.what()}});
          } catch (...) {
            kLog.error("task failed", {{"group", state->name}, {"task", child->name}, {"error", "unknown exception"}});
          }
        }
        state->children.erase(id);
        state->changed.notify();
      }));
  return true;
}

void TaskGroup::cancel() {
  state_->cancelled = true;
  // Snapshot first: a child may finish (and be erased) while we emit to its siblings.
  std::vector<std::shared_ptr<State::Child>> running;
  running.reserve(state_->children.size());
  for (auto& [id, child] : state_->children) running.push_back(child);
  for (auto& child : running) {
    if (!child->finished) child->signal.emit(asio::cancellation_type::terminal);
  }
}

bool TaskGroup::cancelled() const { return state_->cancelled; }

asio::awaitable<void> TaskGroup::join() {
  auto state = state_;  // the group may be destroyed while we wait
  while (!state->children.empty()) {
    co_await state->changed.wait(state->changed.generation());
  }
}

asio::awaitable<bool> TaskGroup::join_for(std::chrono::steady_clock::duration timeout) {
  co_return co_await with_timeout(join(), timeout);
}

std::size_t TaskGroup::size() const { return state_->children.size(); }

}  // namespace mooring::async
