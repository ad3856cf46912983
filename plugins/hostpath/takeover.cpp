#include "plugins/hostpath/takeover.hpp"

#include <algorithm>
#include <array>

#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

const log::Logger kLog{"takeover"};
using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

bool touches_state(std::string_view rpc) {
  static constexpr std::array<std::string_view, 7> kStateless = {"GetPluginInfo",
                                                                 "GetPluginCapabilities",
                                                                 "Probe",
                                                                 "NodeGetInfo",
                                                                 "NodeGetCapabilities",
                                                                 "ControllerGetCapabilities",
                                                                 "GroupControllerGetCapabilities"};
  return std::find(kStateless.begin(), kStateless.end(), rpc) == kStateless.end();
}

Takeover::Takeover(std::vector<Lock> locks, std::function<std::string()> open_state, std::chrono::milliseconds poll)
    : specs_(std::move(locks)), open_state_(std::move(open_state)), poll_(poll) {}

Takeover::~Takeover() {
  stop();
  if (waiter_.joinable()) waiter_.join();
}

std::string Takeover::take_locks(bool& busy) {
  busy = false;
  while (held_.size() < specs_.size()) {
    const auto& spec = specs_[held_.size()];
    auto lock = durable::InstanceLock::acquire(spec.path, spec.what, &busy);
    if (!lock) return lock.error();
    held_.push_back(std::move(*lock));
  }
  return {};
}

Takeover::Start Takeover::start() {
  bool busy = false;
  if (auto err = take_locks(busy); !err.empty()) {
    std::lock_guard guard(mu_);
    if (busy) {
      holder_ = err;
      return Start::standby;
    }
    state_ = State::failed;
    error_ = err;
    return Start::failed;
  }
  finish(open_state_());
  return active() ? Start::active : Start::failed;
}

void Takeover::finish(const std::string& open_error) {
  {
    std::lock_guard guard(mu_);
    if (state_ == State::stopped) return;  // stopping meanwhile: held calls were already answered
    state_ = open_error.empty() ? State::active : State::failed;
    error_ = open_error;
  }
  changed_.notify_all();
}

void Takeover::wait_in_background(std::function<void(const std::string& error)> done) {
  waiter_ = std::thread([this, done = std::move(done)] {
    const auto since = Clock::now();
    auto next_note = since + std::chrono::seconds(30);
    for (;;) {
      bool busy = false;
      auto err = take_locks(busy);
      if (err.empty()) break;
      if (!busy) {
        finish(err);  // an I/O error on the lock file: no waiting helps
        done(err);
        return;
      }
      std::unique_lock lock(mu_);
      holder_ = err;
      if (changed_.wait_for(lock, poll_, [&] { return state_ == State::stopped; })) return;
      if (Clock::now() >= next_note) {
        kLog.warn("still waiting for the node's lock; calls that touch state are held",
                  {{"holder", holder_}, {"waited_ms", ms_since(since)}});
        next_note = Clock::now() + std::chrono::seconds(30);
      }
    }
    kLog.info("took over: the previous copy released the node's lock", {{"waited_ms", ms_since(since)}});
    auto err = open_state_();
    finish(err);
    done(err);
  });
}

grpc::Status Takeover::hold(std::string_view rpc, std::chrono::system_clock::time_point deadline,
                            const std::function<bool()>& cancelled) {
  std::unique_lock lock(mu_);
  const auto since = Clock::now();
  while (state_ == State::standby) {
    const auto left = deadline - std::chrono::system_clock::now();
    if (left <= decltype(left)::zero()) {
      return {grpc::StatusCode::DEADLINE_EXCEEDED,
              std::string(rpc) + " was held " + std::to_string(ms_since(since)) +
                  " ms until its deadline and did nothing: this plugin copy waits for the node's lock (" + holder_ +
                  ")"};
    }
    if (cancelled && cancelled()) return {grpc::StatusCode::CANCELLED, std::string(rpc) + " was cancelled while held"};
    changed_.wait_for(lock, std::min<std::chrono::system_clock::duration>(left, std::chrono::milliseconds(20)));
  }
  switch (state_) {
    case State::active: ++running_; return grpc::Status::OK;
    case State::draining:
      return {grpc::StatusCode::UNAVAILABLE,
              std::string(rpc) + " did nothing: this plugin copy is stopping and hands the node over to its successor"};
    case State::failed:
      return {grpc::StatusCode::UNAVAILABLE,
              std::string(rpc) + " did nothing: this plugin copy cannot serve: " + error_};
    default:
      return {grpc::StatusCode::UNAVAILABLE,
              std::string(rpc) +
                  " did nothing: this plugin copy is stopping before it took over from the copy "
                  "holding the node's lock"};
  }
}

void Takeover::done() {
  {
    std::lock_guard guard(mu_);
    if (running_ > 0) --running_;
  }
  changed_.notify_all();
}

std::size_t Takeover::drain(std::chrono::milliseconds grace) {
  std::size_t left = 0;
  {
    std::unique_lock lock(mu_);
    if (state_ == State::active) {
      state_ = State::draining;
      changed_.wait_for(lock, grace, [&] { return running_ == 0; });
      left = running_;
    } else if (state_ == State::standby) {
      state_ = State::stopped;
    }
  }
  changed_.notify_all();
  if (waiter_.joinable()) waiter_.join();
  if (left > 0) kLog.warn("calls still running after the drain; releasing the node's lock anyway", {{"calls", left}});
  const bool had = !held_.empty();
  held_.clear();
  if (had) kLog.info("released the node's lock");
  return left;
}

void Takeover::stop() {
  {
    std::lock_guard guard(mu_);
    if (state_ == State::standby) state_ = State::stopped;
  }
  changed_.notify_all();
}

bool Takeover::active() const {
  std::lock_guard guard(mu_);
  return state_ == State::active;
}

std::string Takeover::error() const {
  std::lock_guard guard(mu_);
  return error_;
}

std::string Takeover::holder() const {
  std::lock_guard guard(mu_);
  return holder_;
}

}  // namespace mooring::hostpath
