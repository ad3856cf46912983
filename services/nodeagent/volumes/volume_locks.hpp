// At most one CSI operation in flight per volume (CSI spec; Nomad serializes per volume, not per
// plugin): a FIFO async mutex per volume id. Different volumes never wait for each other.
//
// Not thread-safe: use from one executor (the agent's io_context thread).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace mooring::nodeagent {

class VolumeLocks {
 public:
  struct State;

  // Holds one volume's lock until destroyed (or moved from); then the next waiter gets it.
  class Guard {
   public:
    Guard() = default;
    Guard(std::shared_ptr<State> state, std::string volume_id);
    ~Guard();
    Guard(Guard&& other) noexcept;
    Guard& operator=(Guard&& other) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

    bool owns() const { return state_ != nullptr; }
    void unlock();

   private:
    std::shared_ptr<State> state_;
    std::string volume_id_;
  };

  explicit VolumeLocks(boost::asio::any_io_executor executor);
  ~VolumeLocks();
  VolumeLocks(const VolumeLocks&) = delete;
  VolumeLocks& operator=(const VolumeLocks&) = delete;

  // Waits (FIFO) until this volume is free. Cancelling the awaiting coroutine while it waits
  // leaves the queue and throws operation_aborted.
  boost::asio::awaitable<Guard> lock(std::string volume_id);

  bool locked(const std::string& volume_id) const;
  std::size_t waiting(const std::string& volume_id) const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace mooring::nodeagent
