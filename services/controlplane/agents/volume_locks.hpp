// Agents room: at most one controller operation in flight per volume (CSI: "the CO keeps at
// most one call in flight per volume"). Serialization is per volume, not per plugin, so a slow
// detach of one volume never holds up another volume of the same plugin.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace mooring::controlplane::agents {

// A FIFO async mutex per key. Single-threaded: use from the executor it was made with.
class VolumeLocks {
 public:
  explicit VolumeLocks(boost::asio::any_io_executor executor);
  ~VolumeLocks();
  VolumeLocks(const VolumeLocks&) = delete;
  VolumeLocks& operator=(const VolumeLocks&) = delete;

  // Holds the key's lock until destroyed (or reset). Move-only.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& other) noexcept;
    Guard& operator=(Guard&& other) noexcept;
    ~Guard();
    void reset();
    bool owns() const { return owner_ != nullptr; }

   private:
    friend class VolumeLocks;
    Guard(VolumeLocks* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    VolumeLocks* owner_ = nullptr;
    std::string key_;
  };

  // Waits (FIFO) until the key is free. Cancelling the waiting coroutine throws
  // operation_aborted and leaves the queue intact for the others.
  boost::asio::awaitable<Guard> lock(std::string key);

  bool locked(const std::string& key) const { return entries_.count(key) != 0; }
  std::size_t waiting(const std::string& key) const;

 private:
  struct Waiter;
  struct Entry {
    std::deque<std::shared_ptr<Waiter>> waiters;
  };
  void unlock(const std::string& key);

  boost::asio::any_io_executor executor_;
  std::map<std::string, Entry> entries_;  // present while held
};

}  // namespace mooring::controlplane::agents
