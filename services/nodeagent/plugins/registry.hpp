// The agent's dynamic plugin registry: which CSI plugin instances run on this node and where
// their sockets are. A monolith registers as both controller and node. The newest instance of a
// plugin wins; a late deregistration of a replaced instance is ignored. Persisted atomically in
// the data dir so a restarted agent finds the sockets of plugins it did not launch.
//
// Not thread-safe: every call happens on the agent's executor (one io_context thread).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace mooring::nodeagent {

enum class PluginKind { controller, node };
std::string_view to_string(PluginKind kind);

struct PluginRegistration {
  std::string plugin_id;
  std::string socket_path;  // filesystem path of the CSI unix socket
  std::string provider;     // GetPluginInfo.name
  std::string version;      // GetPluginInfo.vendor_version
  bool launched = false;    // true: this agent launched the process
  std::string alloc_id;     // a plugin task's allocation (it owns the instance); empty otherwise
};

struct PluginInstance {
  PluginKind kind = PluginKind::node;
  PluginRegistration reg;
  uint64_t generation = 0;  // increases with every registration; identifies this instance
  int64_t registered_at_ms = 0;
};

struct RegistryEvent {
  enum class Type { registered, deregistered };
  Type type = Type::registered;
  PluginInstance instance;
};

class PluginRegistry;

// A stream of registry changes for one consumer. next() waits for the next change; changes that
// happen while nobody waits are queued (bounded: the oldest are dropped and `overflowed` set, so
// a slow consumer re-reads the full list instead of acting on a partial picture).
class RegistrySubscription {
 public:
  ~RegistrySubscription();
  RegistrySubscription(const RegistrySubscription&) = delete;
  RegistrySubscription& operator=(const RegistrySubscription&) = delete;

  boost::asio::awaitable<RegistryEvent> next();
  bool overflowed() const;

  struct State;

 private:
  friend class PluginRegistry;
  explicit RegistrySubscription(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

class PluginRegistry {
 public:
  // `state_file` empty: in-memory only (tests).
  explicit PluginRegistry(std::filesystem::path state_file = {});
  ~PluginRegistry();

  // Reads the persisted instances (a missing file is an empty registry).
  std::error_code load();

  // Registers the instance for each kind (a monolith passes both) and returns its generation,
  // which the owner later passes to deregister.
  uint64_t register_plugin(const std::vector<PluginKind>& kinds, PluginRegistration reg);

  // Removes (kind, plugin_id) only when it is still the instance `generation`; returns whether
  // something was removed. A replaced instance's late deregistration is a no-op.
  bool deregister(PluginKind kind, const std::string& plugin_id, uint64_t generation);

  std::optional<PluginInstance> lookup(PluginKind kind, const std::string& plugin_id) const;
  std::vector<PluginInstance> list() const;
  std::vector<PluginInstance> list(PluginKind kind) const;

  std::unique_ptr<RegistrySubscription> subscribe(boost::asio::any_io_executor ex);

  // The last persistence error (the registry keeps working in memory).
  std::error_code last_save_error() const { return save_error_; }

 private:
  void publish(RegistryEvent::Type type, const PluginInstance& instance);
  void save();

  std::filesystem::path state_file_;
  std::map<std::pair<PluginKind, std::string>, PluginInstance> instances_;
  uint64_t next_generation_ = 1;
  std::vector<std::weak_ptr<RegistrySubscription::State>> subscribers_;
  std::error_code save_error_;
};

}  // namespace mooring::nodeagent
