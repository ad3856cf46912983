#include "services/controlplane/http/connection_limits.hpp"

namespace mooring::controlplane::http {

ConnectionLimits::ConnectionLimits(std::size_t max_total, std::size_t max_per_client)
    : max_total_(max_total), max_per_client_(max_per_client) {}

std::size_t ConnectionLimits::count(std::string_view client) const {
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

std::optional<ConnectionLimits::Id> ConnectionLimits::oldest_idle_of(std::string_view client) const {
  // Linear, but only when a client is at its limit, and the list holds at most max_total ids.
  for (Id id : idle_)
    if (entries_.at(id).client == client) return id;
  return std::nullopt;
}

ConnectionLimits::Admission ConnectionLimits::admit(Id id, const std::string& client) {
  Admission out;
  if (count(client) >= max_per_client_) {
    // Evicting one of the client's own idle connections frees a global slot too.
    out.evicted = oldest_idle_of(client);
    if (!out.evicted) out.refused = Refusal::per_client;
  } else if (entries_.size() >= max_total_) {
    if (!idle_.empty())
      out.evicted = idle_.front();
    else
      out.refused = Refusal::global;
  }
  if (out.refused) return out;
  if (out.evicted) remove(*out.evicted);
  auto& e = entries_[id];
  e.client = client;
  ++per_client_[client];
  set_idle(id, true);
  return out;
}

void ConnectionLimits::set_idle(Id id, bool idle) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.idle == idle) return;
  auto& e = it->second;
  e.idle = idle;
  if (idle) {
    e.idle_pos = idle_.insert(idle_.end(), id);
  } else {
    idle_.erase(e.idle_pos);
  }
}

void ConnectionLimits::remove(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.idle) idle_.erase(it->second.idle_pos);
  auto c = per_client_.find(it->second.client);
  if (--c->second == 0) per_client_.erase(c);
  entries_.erase(it);
}

std::optional<ConnectionLimits::Id> ConnectionLimits::evict_oldest_idle() {
  if (idle_.empty()) return std::nullopt;
  Id id = idle_.front();
  remove(id);
  return id;
}

}  // namespace mooring::controlplane::http
