// HTTP room: which connections the server keeps. Pure bookkeeping with no sockets, so the rules
// (a global and a per-client limit; idle connections give way first, oldest idle first) are tested
// directly; the server asks on every accept and does the closing and answering itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace mooring::controlplane::http {

class ConnectionLimits {
 public:
  using Id = std::uint64_t;  // chosen by the caller, unique among the connections it tracks

  enum class Refusal { global, per_client };

  struct Admission {
    std::optional<Refusal> refused;  // set: the connection was not admitted
    // An idle connection that was forgotten to make room; the caller must close it.
    std::optional<Id> evicted;
  };

  // Both limits must be at least 1.
  ConnectionLimits(std::size_t max_total, std::size_t max_per_client);

  // A new connection from `client` (its address). At a limit, the oldest idle connection that
  // holds the slot (the client's own for the per-client limit, anyone's for the global one)
  // gives way; only when none is idle is the new one refused. It starts out idle.
  Admission admit(Id id, const std::string& client);

  // Idle: waiting for a request of which no byte has arrived yet (a new connection before its
  // first request too). A connection reading or answering a request is never evicted.
  void set_idle(Id id, bool idle);

  // Forgets a connection; unknown ids (already evicted) are ignored.
  void remove(Id id);

  // Forgets and returns the oldest idle connection, if any (for when the process is out of file
  // descriptors and a slot must be freed whatever the limits say).
  std::optional<Id> evict_oldest_idle();

  std::size_t size() const { return entries_.size(); }
  std::size_t count(std::string_view client) const;
  std::size_t idle() const { return idle_.size(); }
  std::size_t max_total() const { return max_total_; }
  std::size_t max_per_client() const { return max_per_client_; }

 private:
  struct Entry {
    std::string client;
    bool idle = false;
    std::list<Id>::iterator idle_pos;  // valid when idle
  };

  std::optional<Id> oldest_idle_of(std::string_view client) const;

  std::size_t max_total_;
  std::size_t max_per_client_;
  std::unordered_map<Id, Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> per_client_;
  std::list<Id> idle_;  // in the order they became idle: the front has waited longest
};

}  // namespace mooring::controlplane::http
