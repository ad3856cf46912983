// Writes and calls out held while the leader's lease is unconfirmed (ha/lease_hold.hpp): they go
// on at the wake-up that follows the lease's confirmation, all at once and without a poll, and are
// refused when the hold ends with the lease still unconfirmed.
#include "services/controlplane/ha/lease_hold.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <exception>
#include <optional>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

#include "services/controlplane/ha/lease_state.hpp"

namespace mooring::controlplane::ha {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct FakeLease : LeaseState {
  bool is_leading = true;
  bool confirmed = false;  // etcd confirmed the lease in time
  Clock::time_point held_until = Clock::now() + 60s;

  bool leading() const override { return is_leading; }
  bool lease_valid() const override { return is_leading && confirmed; }
  Clock::time_point writes_held_until() const override { return held_until; }
};

// One held write and how its wait ended.
struct Held {
  std::optional<bool> go_on;
  std::exception_ptr error;
  bool done() const { return go_on.has_value() || error != nullptr; }
};

class LeaseHoldTest : public ::testing::Test {
 protected:
  void start(Held& h) {
    boost::asio::co_spawn(io, hold.wait_while_unconfirmed(), [&h](std::exception_ptr e, bool go_on) {
      h.error = e;
      if (!e) h.go_on = go_on;
    });
  }
  // Runs every handler that is ready now, and those they make ready, without ever waiting for a
  // timer: what completes here completed without waiting out any period. (An io_context that ran
  // out of work is stopped until restart().)
  void settle() {
    io.restart();
    while (io.poll() > 0) {
    }
  }

  boost::asio::io_context io;
  FakeLease lease;
  bool writable = true;
  LeaseHold hold{io.get_executor(), lease, [this] { return writable; }};
};

TEST_F(LeaseHoldTest, AConfirmedLeaseOrNoLeadershipLetsAWriteGoAtOnce) {
  lease.confirmed = true;
  Held confirmed;
  start(confirmed);
  settle();
  EXPECT_EQ(confirmed.go_on, true);

  lease.is_leading = false;  // a standby's hold never waits (the fenced store refuses its commits)
  Held standby;
  start(standby);
  settle();
  EXPECT_EQ(standby.go_on, true);
}

TEST_F(LeaseHoldTest, HeldWritesAllGoOnAtTheWakeUpAfterTheLeaseIsConfirmed) {
  std::array<Held, 3> held;
  for (auto& h : held) start(h);
  settle();
  for (const auto& h : held) EXPECT_FALSE(h.done()) << "an unconfirmed lease holds the write";

  hold.wake();  // a renewal went unanswered again: nothing changed
  settle();
  for (const auto& h : held) EXPECT_FALSE(h.done()) << "a wake-up with the lease still unconfirmed";

  lease.confirmed = true;
  hold.wake();
  settle();  // no timer expires here: the one wake-up lets every held write go
  for (const auto& h : held) EXPECT_EQ(h.go_on, true);
}

TEST_F(LeaseHoldTest, AHoldThatRunsOutWithTheLeaseUnconfirmedRefusesTheWrite) {
  const auto started = Clock::now();
  lease.held_until = started + 100ms;
  Held h;
  start(h);
  while (!h.done() && Clock::now() - started < 10s) io.run_one_for(1s);
  EXPECT_EQ(h.go_on, false);
  EXPECT_GE(Clock::now() - started, 100ms) << "refused before the hold ended";
}

TEST_F(LeaseHoldTest, AConfirmedLeaseWaitsForTheStateToTakeWritesAgain) {
  writable = false;  // degraded a moment ago: the store refuses writes until the leader resumes
  Held h;
  start(h);
  settle();
  lease.confirmed = true;
  hold.wake();
  settle();
  EXPECT_FALSE(h.done()) << "confirmed, but the state does not take writes yet";

  writable = true;
  hold.wake();
  settle();
  EXPECT_EQ(h.go_on, true);
}

TEST_F(LeaseHoldTest, AWriteHeldWhenTheLeadershipIsLostGoesOnAtTheWakeUp) {
  Held h;
  start(h);
  settle();
  lease.is_leading = false;  // the fence makes its commit fail; the hold itself does not refuse
  hold.wake();
  settle();
  EXPECT_EQ(h.go_on, true);
}

TEST_F(LeaseHoldTest, CancellingAHeldWaitThrowsOperationAborted) {
  Held h;
  boost::asio::cancellation_signal cancel;
  boost::asio::co_spawn(io, hold.wait_while_unconfirmed(),
                        boost::asio::bind_cancellation_slot(cancel.slot(), [&h](std::exception_ptr e, bool go_on) {
                          h.error = e;
                          if (!e) h.go_on = go_on;
                        }));
  settle();
  ASSERT_FALSE(h.done());
  cancel.emit(boost::asio::cancellation_type::terminal);
  settle();
  ASSERT_TRUE(h.error);
  try {
    std::rethrow_exception(h.error);
  } catch (const boost::system::system_error& e) {
    EXPECT_EQ(e.code(), boost::asio::error::operation_aborted);
  }
}

}  // namespace
}  // namespace mooring::controlplane::ha
