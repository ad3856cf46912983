// HA room: leader election over an etcd lease (issue 22). Every control plane on one etcd prefix
// runs one; at most one holds `<prefix>/leader`, a key bound to its lease whose value says where
// it is reached (LeaderRecord). The holder renews the lease every quarter of its TTL (at once again
// when a renewal goes unanswered); a standby reads
// the key every eighth and campaigns (one Txn: create the key if absent) as soon as it is gone.
//
// The leader's writes are fenced by the key (state/fenced_backend.hpp, LeaderFence): once the lease
// has expired, etcd deletes the key and no Txn of the old leader commits. The election also keeps
// its own deadline (the send time of the last renewal etcd confirmed + the TTL, never later than
// etcd's own expiry), so a leader that was paused or cut off refuses writes and steps down as soon
// as it runs again, before it even asks etcd.
//
// A leader that gets no answer from etcd before its deadline (etcd unreachable, or no quorum) is
// *degraded*, not lost (lease_health.hpp): it keeps its memory and keeps asking; when etcd answers
// that the lease is alive and the key still ours it leads again, and when etcd answers that they
// are gone it steps down. Only an answer ends a leadership.
//
// It runs on a thread of its own with blocking gRPC calls (as the backend does), so a busy io
// thread never delays a renewal; it reports to the owner through the two callbacks, from that
// thread: the owner posts them to its executor.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "services/controlplane/ha/lease_health.hpp"
#include "services/controlplane/ha/lease_state.hpp"
#include "services/controlplane/state/fenced_backend.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"

namespace mooring::controlplane::ha {

// The leader key's value: who leads and where it is reached.
struct LeaderRecord {
  std::string id;         // unique per process start
  std::string http_addr;  // "https://10.0.0.1:4700"
  std::string grpc_addr;  // "10.0.0.1:4701"

  std::string to_json() const;
  static std::optional<LeaderRecord> from_json(const std::string& text);
};

struct ElectionOptions {
  std::shared_ptr<EtcdChannels> etcd;  // shared with the backend's traffic or its own
  std::string key;                     // "<prefix>/leader"
  LeaderRecord self;
  std::chrono::milliseconds lease{2'000};    // rounded up to whole seconds (etcd's unit)
  std::chrono::milliseconds timeout{2'000};  // per request
  // Read and name the leader from the start, but campaign only this long after start(): a member
  // that was elected and could not load the state (its keyring lacks the state's root key, say)
  // lets the others take the lead first instead of winning, failing and stepping down again.
  std::chrono::milliseconds campaign_delay{0};
};

// What the election tells its owner, from its own thread (the owner posts them to its executor).
struct ElectionEvents {
  // This process now holds the key; the fence to give the backend.
  std::function<void(LeaderFence)> elected;
  // It held the key and etcd says it no longer does; never called twice, and the election stops
  // campaigning afterwards (the owner steps down).
  std::function<void(const std::string& why)> lost;
  // Leading, but no renewal was confirmed within the lease (etcd unreachable or without quorum):
  // refuse writes, pause what writes or calls out, serve reads marked stale.
  std::function<void(const std::string& why)> degraded;
  // Degraded, and etcd answered again: the lease is alive and the key still ours (same create
  // revision and value), so the fence holds as before. Lead again.
  std::function<void()> restored;
  // Optional. Leading, and a renewal went unanswered past the lease's deadline: writes and calls
  // out are held (writes_held_until), and reads must not wait for a flush that etcd cannot answer
  // now. `confirmed`: a renewal was answered again before the leader degraded.
  std::function<void()> unconfirmed;
  std::function<void()> confirmed;
  // Optional. Leading, and the lease may have changed: after every renewal's answer (or its
  // absence) and when the leadership is lost. Writes held while the lease is unconfirmed look again
  // (lease_hold.hpp).
  std::function<void()> lease_changed;
};

class LeaderElection final : public LeaseState {
 public:
  LeaderElection(ElectionOptions options, ElectionEvents events);
  ~LeaderElection() override;  // stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  void start();
  // Ends the thread; a leader revokes its lease, so a standby takes over at once instead of after
  // the TTL (a graceful stop hands over in a fraction of a second).
  void stop();

  // Thread-safe views for the REST API's status routes.
  std::optional<LeaderRecord> leader() const;  // as last read; nullopt: none known
  // True while this process holds the key as far as it knows (degraded included).
  bool leading() const override { return leading_.load(); }
  // Leading but cut off from a quorum of etcd for longer than the hold (see above).
  bool degraded() const { return degraded_.load(); }
  // When etcd last confirmed our lease (the send time of that renewal): the age of a degraded
  // leader's memory as far as anybody can prove.
  std::chrono::steady_clock::time_point last_confirmed() const;
  // Why there is no leader to name (etcd not answering, no quorum), "" when etcd answers.
  std::string etcd_problem() const;
  // Read the leader key now rather than at the next poll (a standby whose forward to the leader
  // got no answer: the next request should go to whoever leads now).
  void recheck();
  // Our own deadline for the lease (see above); false when not leading.
  bool lease_valid() const override;
  // A write or call out that finds the lease unconfirmed (its deadline passed) is held rather
  // than refused until this moment: one lease past the deadline, when the leader degrades if
  // etcd still has not answered. etcd's own raft election (its leader died: 1-2 s with etcd's
  // defaults) answers no renewal, and a 2 s lease renewed every half second can run out in it;
  // etcd extends every lease when its new raft leader takes over, so the renewal a follower held
  // is answered as soon as there is one, and what waited goes on. Nothing is sent meanwhile, so
  // the hold is safe however the outage ends (lease gone: refused, and we step down).
  std::chrono::steady_clock::time_point writes_held_until() const override;
  // Blocks the calling thread (the backend's writer) until lease_valid() or until
  // writes_held_until() (or no longer leading); returns lease_valid().
  bool await_lease() const;
  std::chrono::milliseconds ttl() const { return ttl_; }

 private:
  void run();
  bool campaign();  // one attempt; true when elected
  void renew();     // one renewal while leading
  void wait(std::chrono::milliseconds d);
  void set_leader(std::optional<LeaderRecord> r, std::string problem);
  void lose(const std::string& why);
  void publish();  // health_ -> the atomics other threads read
  LeaseHealth::Key check_key(std::string& detail);

  ElectionOptions options_;
  ElectionEvents events_;
  std::chrono::milliseconds ttl_;
  struct Stubs;
  std::unique_ptr<Stubs> stubs_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::condition_variable lease_cv_;  // publish() and lose(): for await_lease()
  bool stopping_ = false;
  bool recheck_ = false;
  std::optional<LeaderRecord> leader_;
  std::string problem_ = "etcd has not answered yet";
  std::atomic<bool> leading_{false};
  std::atomic<bool> degraded_{false};
  std::atomic<std::int64_t> deadline_ns_{0};   // steady_clock, the lease's end by our clock
  std::atomic<std::int64_t> confirmed_ns_{0};  // steady_clock, health_->last_confirmed()
  std::optional<LeaseHealth> health_;          // while leading; the election thread's only
  std::optional<LeaderFence> fence_;           // the key as we created it
  std::int64_t lease_id_ = 0;
  std::chrono::steady_clock::time_point campaign_from_;  // start() + options_.campaign_delay
  // Leading: when the next renewal is sent (a quarter TTL after the last confirmed one was sent).
  std::chrono::steady_clock::time_point next_renewal_{};
  bool lost_called_ = false;
  bool unconfirmed_told_ = false;  // events_.unconfirmed was called and no confirmed/restored since
  std::chrono::steady_clock::time_point last_warning_{};
  std::thread thread_;  // last: started by start(), joined by stop()
};

}  // namespace mooring::controlplane::ha
