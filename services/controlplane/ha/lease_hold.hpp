// HA room: a write or call out that finds the leader's lease unconfirmed (etcd has not confirmed
// a renewal in time: its own raft election, say) is held rather than refused, until etcd confirms
// the lease and the state takes writes, for at most LeaseState::writes_held_until(). The REST
// front holds writes with it, the agent service every call, the agent router every node and
// controller call.
// Held waiters sleep until woken, not on a poll: the election's owner calls wake() on the
// executor whenever the lease may have changed (each renewal's answer or its absence, a lost
// leadership) and whenever the state may have become writable again, and every held waiter looks
// again at once.
#pragma once

#include <functional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/async/wake_signal.hpp"

namespace mooring::controlplane::ha {

class LeaseState;

class LeaseHold {
 public:
  // `lease` and `writable` (the state takes writes) are read on `executor`; `lease` outlives this.
  LeaseHold(boost::asio::any_io_executor executor, const LeaseState& lease, std::function<bool()> writable);
  LeaseHold(const LeaseHold&) = delete;
  LeaseHold& operator=(const LeaseHold&) = delete;

  // True: go on (the lease is confirmed and the state writable, or this process does not lead);
  // false: the hold ran out with the lease unconfirmed (or the state not writable), so refuse. At
  // once when the lease is not unconfirmed. Cancelling the awaiting coroutine throws
  // operation_aborted.
  boost::asio::awaitable<bool> wait_while_unconfirmed();

  // On the executor: the lease or the state's writability may have changed; every held waiter
  // looks again now.
  void wake() { changed_.notify(); }

 private:
  const LeaseState& lease_;
  std::function<bool()> writable_;
  async::WakeSignal changed_;
};

}  // namespace mooring::controlplane::ha
