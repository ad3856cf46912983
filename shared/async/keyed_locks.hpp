// A FIFO async mutex per key. Both services use it for "at most one CSI operation in flight per
// volume" (CSI spec; Nomad serializes per volume, not per plugin): the node agent around node
// operations, the control plane around controller operations. Different keys never wait for
// each other.
//
// Not thread-safe: use from one executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace mooring::async {

class KeyedLocks {
 public:
  struct State;

  // Holds one key's lock until destroyed (or moved from); then the next waiter gets it.
  class Guard {
   public:
    Guard() = default;
    Guard(std::shared_ptr<State> state, std::string key);
    ~Guard();
    Guard(Guard&& other) noexcept;
    Guard& operator=(Guard&& other) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

    bool owns() const { return state_ != nullptr; }
    void unlock();

   private:
    std::shared_ptr<State> state_;
    std::string key_;
  };

  explicit KeyedLocks(boost::asio::any_io_executor executor);
  ~KeyedLocks();
  KeyedLocks(const KeyedLocks&) = delete;
  KeyedLocks& operator=(const KeyedLocks&) = delete;

  // Waits (FIFO) until this key is free. Cancelling the awaiting coroutine while it waits
  // leaves the queue and throws operation_aborted.
  boost::asio::awaitable<Guard> lock(std::string key);

  bool locked(const std::string& key) const;
  std::size_t waiting(const std::string& key) const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace mooring::async
