#include "services/nodeagent/rpcserver/leader_fence.hpp"

#include "shared/durable/durable_file.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

const log::Logger kLog{"leader-fence"};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

LeaderFence::LeaderFence(std::filesystem::path file) : file_(std::move(file)) {
  if (file_.empty()) return;
  std::error_code ec;
  const auto text = durable::read_file(file_, ec);
  if (ec) {
    kLog.warn("cannot read the leader epoch; it is learnt again from the control plane",
              {{"file", file_.string()}, {"error", ec.message()}});
    return;
  }
  if (!text) return;
  if (auto epoch = domain::LeaderEpoch::parse(trimmed(*text))) {
    known_ = *epoch;
    return;
  }
  kLog.warn("the leader epoch file does not hold an epoch; it is learnt again from the control plane",
            {{"file", file_.string()}});
}

void LeaderFence::heard(const domain::LeaderEpoch& epoch) {
  std::lock_guard lock(mu_);
  if (epoch.cluster == known_.cluster && epoch.revision <= known_.revision) return;
  if (epoch.cluster != known_.cluster && !known_.none())
    kLog.warn("the control plane answers from another etcd cluster; its epoch replaces the one known",
              {{"known", known_.to_text()}, {"now", epoch.to_text()}});
  store(epoch);
}

std::optional<std::string> LeaderFence::admit(const std::optional<domain::LeaderEpoch>& epoch) {
  std::lock_guard lock(mu_);
  const domain::LeaderEpoch call = epoch.value_or(domain::LeaderEpoch{});
  if (known_.none()) {
    if (!call.none()) store(call);
    return std::nullopt;
  }
  if (call.none())
    return "the call carries no leader epoch, and this agent's control plane has one (" + known_.to_text() +
           "): it does not come from the leader; nothing was done";
  if (call.cluster != known_.cluster)
    return "the call comes from a control plane of another etcd cluster (leader epoch " + call.to_text() +
           ", this agent's leader is " + known_.to_text() + "); nothing was done";
  if (call.revision < known_.revision)
    return "the control plane that sent the call no longer leads: its leader epoch " + call.to_text() +
           " is older than " + known_.to_text() + ", heard from the leader since; nothing was done";
  if (call.revision > known_.revision) store(call);
  return std::nullopt;
}

domain::LeaderEpoch LeaderFence::current() const {
  std::lock_guard lock(mu_);
  return known_;
}

void LeaderFence::store(const domain::LeaderEpoch& epoch) {
  known_ = epoch;
  if (file_.empty()) return;
  // Once per election: a rename is cheap enough. A failed write leaves the epoch in memory.
  if (auto ec = durable::write_file_atomically(file_, epoch.to_text() + "\n"))
    kLog.warn("cannot write the leader epoch", {{"file", file_.string()}, {"error", ec.message()}});
}

}  // namespace mooring::nodeagent
