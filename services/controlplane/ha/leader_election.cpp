#include "services/controlplane/ha/leader_election.hpp"

#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include "etcd/rpc.grpc.pb.h"
#include "shared/log/log.hpp"

namespace mooring::controlplane::ha {
namespace {

namespace pb = ::etcdserverpb;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const log::Logger kLog{"leader"};

std::int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string status_text(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

// The key written under the lease only if nobody holds it; when somebody does, the answer reads
// who.
pb::TxnRequest put_if_absent(const std::string& key, const std::string& value, std::int64_t lease) {
  pb::TxnRequest txn;
  auto* absent = txn.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  txn.add_failure()->mutable_request_range()->set_key(key);
  return txn;
}

}  // namespace

std::string LeaderRecord::to_json() const {
  return nlohmann::json{{"ID", id}, {"HTTPAddr", http_addr}, {"GRPCAddr", grpc_addr}}.dump();
}

std::optional<LeaderRecord> LeaderRecord::from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LeaderRecord r;
  r.id = j.value("ID", "");
  r.http_addr = j.value("HTTPAddr", "");
  r.grpc_addr = j.value("GRPCAddr", "");
  if (r.id.empty()) return std::nullopt;
  return r;
}

// Calls on etcd's current endpoint (EtcdChannels: the next one when it is gone).
struct LeaderElection::Stubs {
  std::shared_ptr<EtcdChannels> etcd;

  template <class Call>
  grpc::Status kv(Call&& c) const {
    return etcd->call<pb::KV>(std::forward<Call>(c));
  }
  template <class Call>
  grpc::Status lease(Call&& c) const {
    return etcd->call<pb::Lease>(std::forward<Call>(c));
  }
};

LeaderElection::LeaderElection(ElectionOptions options, ElectionEvents events)
    : options_(std::move(options)),
      events_(std::move(events)),
      // etcd counts leases in whole seconds (and raises a TTL below its minimum, ~1.5 s by default).
      ttl_(std::chrono::seconds(std::max<std::int64_t>(1, (options_.lease.count() + 999) / 1000))),
      stubs_(std::make_unique<Stubs>()) {
  stubs_->etcd = options_.etcd;
}

LeaderElection::~LeaderElection() { stop(); }

void LeaderElection::start() {
  if (thread_.joinable()) return;
  campaign_from_ = Clock::now() + options_.campaign_delay;
  if (options_.campaign_delay.count() > 0)
    kLog.warn("holding back from the election",
              {{"key", options_.key}, {"for_ms", std::to_string(options_.campaign_delay.count())}});
  thread_ = std::thread([this] { run(); });
}

void LeaderElection::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  lease_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (leading_.exchange(false) && lease_id_ != 0) {
    // Hand over now: revoking the lease deletes the key, and a standby's next read finds it gone.
    pb::LeaseRevokeRequest req;
    req.set_id(lease_id_);
    pb::LeaseRevokeResponse res;
    if (auto s = stubs_->lease([&](auto& lease) {
          grpc::ClientContext ctx;  // one per attempt
          ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
          return lease.LeaseRevoke(&ctx, req, &res);
        });
        s.ok())
      kLog.info("leadership handed over (lease revoked)", {{"key", options_.key}});
    else
      kLog.warn("cannot revoke the leader lease; a standby takes over when it expires",
                {{"key", options_.key}, {"error", status_text(s)}});
  }
}

std::optional<LeaderRecord> LeaderElection::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

std::string LeaderElection::etcd_problem() const {
  std::lock_guard lock(mu_);
  return problem_;
}

bool LeaderElection::lease_valid() const {
  return leading_.load() && !degraded_.load() && to_ns(Clock::now()) < deadline_ns_.load();
}

Clock::time_point LeaderElection::writes_held_until() const {
  return Clock::time_point(std::chrono::nanoseconds(deadline_ns_.load())) + ttl_;
}

bool LeaderElection::await_lease() const {
  std::unique_lock lock(mu_);
  lease_cv_.wait_until(lock, writes_held_until(), [this] { return stopping_ || !leading_.load() || lease_valid(); });
  return lease_valid();
}

Clock::time_point LeaderElection::last_confirmed() const {
  return Clock::time_point(std::chrono::nanoseconds(confirmed_ns_.load()));
}

void LeaderElection::publish() {
  if (!health_) return;
  {
    std::lock_guard lock(mu_);  // await_lease() reads them under it: no wake-up lost
    deadline_ns_ = to_ns(health_->deadline());
    confirmed_ns_ = to_ns(health_->last_confirmed());
    degraded_ = health_->role() == LeaseHealth::Role::degraded;
  }
  lease_cv_.notify_all();
  if (events_.lease_changed) events_.lease_changed();
}

void LeaderElection::set_leader(std::optional<LeaderRecord> r, std::string problem) {
  std::lock_guard lock(mu_);
  if (r && (!leader_ || leader_->id != r->id))
    kLog.info(
        "leader",
        {{"id", r->id}, {"http_addr", r->http_addr}, {"grpc_addr", r->grpc_addr}, {"self", r->id == options_.self.id}});
  leader_ = std::move(r);
  problem_ = std::move(problem);
}

void LeaderElection::wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping_ || (recheck_ && !leading_); });
  recheck_ = false;
}

void LeaderElection::recheck() {
  {
    std::lock_guard lock(mu_);
    recheck_ = true;
  }
  cv_.notify_all();
}

void LeaderElection::lose(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    leading_ = false;
    degraded_ = false;
    deadline_ns_ = 0;
  }
  lease_cv_.notify_all();
  if (events_.lease_changed) events_.lease_changed();
  set_leader(std::nullopt, "this control plane lost the leadership: " + why);
  if (lost_called_) return;
  lost_called_ = true;
  kLog.error("leadership lost", {{"key", options_.key}, {"reason", why}});
  events_.lost(why);
}

void LeaderElection::run() {
  const auto poll = std::max<std::chrono::milliseconds>(ttl_ / 8, 100ms);
  auto last_warning = Clock::time_point{};
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (lost_called_) {  // stepped down: the owner takes it from here
      wait(1s);
      continue;
    }
    if (leading_) {
      renew();
      continue;
    }
    if (campaign()) continue;
    if (auto problem = etcd_problem();
        !problem.empty() && Clock::now() >= campaign_from_ && Clock::now() - last_warning > 5s) {
      kLog.warn("waiting for etcd", {{"key", options_.key}, {"error", problem}});
      last_warning = Clock::now();
    }
    wait(poll);
  }
}

bool LeaderElection::campaign() {
  auto context = [this] {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + options_.timeout);
    return ctx;
  };
  pb::RangeRequest range;
  range.set_key(options_.key);
  pb::RangeResponse current;
  if (auto s = stubs_->kv([&](auto& kv) { return kv.Range(context().get(), range, &current); }); !s.ok()) {
    // The leader we last read stays named: when etcd lost its quorum it may well still lead
    // (degraded, serving reads from memory), and standbys forward reads to it.
    set_leader(leader(), "etcd does not answer: " + status_text(s));
    return false;
  }
  if (current.kvs_size() == 1) {
    auto r = LeaderRecord::from_json(current.kvs(0).value());
    // Our own id under another lease cannot happen (a fresh id per start); a record that does not
    // parse is somebody else's key on our prefix: name it rather than take it over.
    set_leader(r, r ? "" : "the leader key " + options_.key + " holds something that is not a leader record");
    return false;
  }

  if (Clock::now() < campaign_from_) {
    set_leader(std::nullopt,
               "no leader yet; this member holds back from the election for a while (it could not "
               "load the state when it last led)");
    return false;
  }

  // Nobody leads: a lease of our own, then the key under it if it is still absent.
  const auto sent = Clock::now();
  pb::LeaseGrantRequest grant;
  grant.set_ttl(std::chrono::duration_cast<std::chrono::seconds>(ttl_).count());
  pb::LeaseGrantResponse granted;
  if (auto s = stubs_->lease([&](auto& lease) { return lease.LeaseGrant(context().get(), grant, &granted); });
      !s.ok() || !granted.error().empty()) {
    set_leader(std::nullopt, "etcd refused a lease: " + (s.ok() ? granted.error() : status_text(s)));
    return false;
  }
  const std::string value = options_.self.to_json();
  const pb::TxnRequest txn = put_if_absent(options_.key, value, granted.id());
  pb::TxnResponse res;
  const auto s = stubs_->kv([&](auto& kv) { return kv.Txn(context().get(), txn, &res); });
  if (!s.ok() || !res.succeeded()) {
    // Lost the race (or cannot tell): give the lease back so a key we may have written goes too.
    pb::LeaseRevokeRequest revoke;
    revoke.set_id(granted.id());
    pb::LeaseRevokeResponse revoked;
    (void)stubs_->lease([&](auto& lease) { return lease.LeaseRevoke(context().get(), revoke, &revoked); });
    if (!s.ok()) {
      set_leader(std::nullopt, "etcd does not answer: " + status_text(s));
    } else if (res.responses_size() == 1 && res.responses(0).response_range().kvs_size() == 1) {
      set_leader(LeaderRecord::from_json(res.responses(0).response_range().kvs(0).value()), "");
    }
    return false;
  }
  lease_id_ = granted.id();
  const auto granted_ttl = std::chrono::seconds(std::max<std::int64_t>(1, granted.ttl()));
  health_.emplace(sent, granted_ttl, ttl_);  // held for one lease before degrading
  next_renewal_ = sent + ttl_ / 4;
  publish();
  leading_ = true;
  set_leader(options_.self, "");
  kLog.info("elected leader", {{"key", options_.key},
                               {"lease_ttl_s", static_cast<int64_t>(granted_ttl.count())},
                               {"create_revision", res.header().revision()}});
  fence_ = LeaderFence{.key = options_.key,
                       .create_revision = res.header().revision(),
                       .cluster_id = res.header().cluster_id(),
                       .value = value,
                       .lease_valid = [this] { return lease_valid(); },
                       .await_lease = [this] { return await_lease(); }};
  events_.elected(*fence_);
  return true;
}

void LeaderElection::renew() {
  // Leading: a quarter TTL after the last confirmed renewal was *sent* (one held through etcd's
  // election by a follower is answered late, and the next must not wait another quarter).
  // Unanswered: at once again (not faster than every 100 ms), so the first renewal etcd can answer
  // after its election is in flight. Degraded: often, so writes resume soon after the quorum returns.
  const auto now = Clock::now();
  if (next_renewal_ > now) wait(std::chrono::duration_cast<std::chrono::milliseconds>(next_renewal_ - now));
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
  }
  // One keep-alive per stream, each with a deadline, so a hung member cannot hold us past the lease.
  const auto sent = Clock::now();
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease_id_);
  pb::LeaseKeepAliveResponse res;
  bool answered = false;
  const auto status = stubs_->lease([&](auto& lease) {
    grpc::ClientContext ctx;  // one per attempt
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::min<std::chrono::milliseconds>(options_.timeout, ttl_ / 2));
    auto stream = lease.LeaseKeepAlive(&ctx);
    answered = stream->Write(req) && stream->Read(&res);
    stream->WritesDone();
    return stream->Finish();
  });
  const bool was_degraded = health_->role() == LeaseHealth::Role::degraded;
  auto next = answered ? health_->renewed(sent, std::chrono::seconds(res.ttl())) : health_->unanswered(Clock::now());
  next_renewal_ = health_->role() == LeaseHealth::Role::degraded
                      ? Clock::now() + std::max<std::chrono::milliseconds>(ttl_ / 8, 100ms)
                  : answered ? sent + ttl_ / 4
                             : sent + 100ms;
  std::string key_detail;
  if (next == LeaseHealth::Next::check_key) next = health_->key_checked(check_key(key_detail));
  publish();
  if (health_->role() == LeaseHealth::Role::leading) {
    const bool unconfirmed = !health_->lease_valid(Clock::now());
    if (unconfirmed != unconfirmed_told_) {
      unconfirmed_told_ = unconfirmed;
      if (auto& tell = unconfirmed ? events_.unconfirmed : events_.confirmed) tell();
    }
  }
  static constexpr auto kWarnEvery = 5s;
  switch (next) {
    case LeaseHealth::Next::nothing:
      if (!answered && Clock::now() - last_warning_ > kWarnEvery) {  // renewals are retried every 100 ms
        kLog.warn(
            was_degraded ? "etcd still does not answer; writes stay refused" : "leader lease renewal failed; retrying",
            {{"key", options_.key}, {"error", status_text(status)}});
        last_warning_ = Clock::now();
      }
      return;
    case LeaseHealth::Next::degrade: {
      const std::string why =
          "no renewal of the " + std::to_string(ttl_.count() / 1000) +
          " s leader lease was confirmed within it and a hold of one more (etcd: " + status_text(status) + ")";
      set_leader(options_.self, "etcd has no quorum or cannot be reached: " + why);
      last_warning_ = Clock::now();
      kLog.error(
          "leader degraded: etcd has no quorum or cannot be reached; refusing writes, serving reads from memory "
          "until it answers",
          {{"key", options_.key}, {"reason", why}});
      events_.degraded(why);
      return;
    }
    case LeaseHealth::Next::restore:
      set_leader(options_.self, "");
      kLog.info("etcd answers again and the leader key is still ours: leading again",
                {{"key", options_.key}, {"create_revision", fence_->create_revision}});
      events_.restored();
      return;
    case LeaseHealth::Next::lose:
      lose(key_detail.empty()
               ? "etcd says the lease expired (this process was paused or cut off for longer than the lease)"
               : key_detail);
      return;
    case LeaseHealth::Next::check_key: return;  // answered by key_checked above
  }
}

LeaseHealth::Key LeaderElection::check_key(std::string& detail) {
  pb::RangeRequest range;
  range.set_key(options_.key);
  pb::RangeResponse current;
  const auto s = stubs_->kv([&](auto& kv) {
    grpc::ClientContext ctx;  // one per attempt
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    return kv.Range(&ctx, range, &current);
  });
  if (!s.ok()) return LeaseHealth::Key::unanswered;
  if (current.kvs_size() == 0) {
    detail = "the leader key is gone although our lease is alive (deleted by hand?)";
    return LeaseHealth::Key::gone;
  }
  const auto& kv = current.kvs(0);
  if (kv.create_revision() == fence_->create_revision && kv.value() == fence_->value) return LeaseHealth::Key::ours;
  detail = "another control plane holds the leader key now";
  return LeaseHealth::Key::other;
}

}  // namespace mooring::controlplane::ha
