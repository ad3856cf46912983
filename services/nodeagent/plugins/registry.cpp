#include "services/nodeagent/plugins/registry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "shared/durable/durable_file.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using json = nlohmann::json;
constexpr size_t kMaxQueued = 1024;

const log::Logger kLog{"registry"};

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::optional<PluginKind> parse_kind(std::string_view s) {
  if (s == "controller") return PluginKind::controller;
  if (s == "node") return PluginKind::node;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(PluginKind kind) { return kind == PluginKind::controller ? "controller" : "node"; }

struct RegistrySubscription::State {
  explicit State(asio::any_io_executor ex) : signal(ex) { signal.expires_at(asio::steady_timer::time_point::max()); }
  asio::steady_timer signal;  // cancelled when an event is queued (a timer used as a condition variable)
  std::deque<RegistryEvent> queue;
  bool overflowed = false;
};

RegistrySubscription::RegistrySubscription(std::shared_ptr<State> state) : state_(std::move(state)) {}
RegistrySubscription::~RegistrySubscription() = default;

bool RegistrySubscription::overflowed() const { return state_->overflowed; }

asio::awaitable<RegistryEvent> RegistrySubscription::next() {
  auto state = state_;
  while (state->queue.empty()) {
    state->signal.expires_at(asio::steady_timer::time_point::max());
    co_await state->signal.async_wait(asio::as_tuple(asio::use_awaitable));
    if (state->queue.empty()) {
      // Woken without an event: our own cancellation.
      throw boost::system::system_error(asio::error::operation_aborted);
    }
  }
  RegistryEvent e = std::move(state->queue.front());
  state->queue.pop_front();
  co_return e;
}

PluginRegistry::PluginRegistry(std::filesystem::path state_file) : state_file_(std::move(state_file)) {}
PluginRegistry::~PluginRegistry() = default;

std::error_code PluginRegistry::load() {
  if (state_file_.empty()) return {};
  std::error_code ec;
  const auto text = durable::read_file(state_file_, ec);
  if (ec) return ec;
  if (!text) return {};
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("plugins") || !doc["plugins"].is_array()) {
    kLog.error("registry file is unreadable; starting empty", {{"path", state_file_.string()}});
    return std::make_error_code(std::errc::invalid_argument);
  }
  for (const auto& p : doc["plugins"]) {
    const auto kind = parse_kind(p.value("kind", ""));
    PluginInstance inst;
    inst.reg.plugin_id = p.value("plugin_id", "");
    inst.reg.socket_path = p.value("socket", "");
    inst.reg.provider = p.value("provider", "");
    inst.reg.version = p.value("version", "");
    inst.reg.launched = p.value("launched", false);
    inst.reg.alloc_id = p.value("alloc_id", "");
    inst.generation = p.value("generation", uint64_t{0});
    inst.registered_at_ms = p.value("registered_at_ms", int64_t{0});
    if (!kind || inst.reg.plugin_id.empty()) continue;
    inst.kind = *kind;
    next_generation_ = std::max(next_generation_, inst.generation + 1);
    instances_[{inst.kind, inst.reg.plugin_id}] = std::move(inst);
  }
  return {};
}

void PluginRegistry::save() {
  if (state_file_.empty()) return;
  json doc;
  doc["version"] = 1;
  doc["plugins"] = json::array();
  for (const auto& [key, inst] : instances_) {
    doc["plugins"].push_back({{"kind", to_string(inst.kind)},
                              {"plugin_id", inst.reg.plugin_id},
                              {"socket", inst.reg.socket_path},
                              {"provider", inst.reg.provider},
                              {"version", inst.reg.version},
                              {"launched", inst.reg.launched},
                              {"alloc_id", inst.reg.alloc_id},
                              {"generation", inst.generation},
                              {"registered_at_ms", inst.registered_at_ms}});
  }
  save_error_ = durable::write_file_atomically(state_file_, doc.dump(2));
  if (save_error_) {
    kLog.error("cannot persist the plugin registry",
               {{"path", state_file_.string()}, {"error", save_error_.message()}});
  }
}

void PluginRegistry::publish(RegistryEvent::Type type, const PluginInstance& instance) {
  std::erase_if(subscribers_, [](const auto& w) { return w.expired(); });
  for (const auto& w : subscribers_) {
    auto s = w.lock();
    if (s->queue.size() >= kMaxQueued) {
      s->queue.pop_front();
      s->overflowed = true;
    }
    s->queue.push_back(RegistryEvent{type, instance});
    s->signal.cancel();
  }
}

uint64_t PluginRegistry::register_plugin(const std::vector<PluginKind>& kinds, PluginRegistration reg) {
  const uint64_t generation = next_generation_++;
  const int64_t now = now_ms();
  for (const auto kind : kinds) {
    PluginInstance inst{kind, reg, generation, now};
    instances_[{kind, reg.plugin_id}] = inst;
    kLog.info("plugin registered", {{"plugin", reg.plugin_id},
                                    {"kind", to_string(kind)},
                                    {"socket", reg.socket_path},
                                    {"generation", generation}});
    publish(RegistryEvent::Type::registered, inst);
  }
  save();
  return generation;
}

bool PluginRegistry::deregister(PluginKind kind, const std::string& plugin_id, uint64_t generation) {
  const auto it = instances_.find({kind, plugin_id});
  if (it == instances_.end() || it->second.generation != generation) return false;
  const PluginInstance inst = it->second;
  instances_.erase(it);
  kLog.info("plugin deregistered", {{"plugin", plugin_id}, {"kind", to_string(kind)}, {"generation", generation}});
  publish(RegistryEvent::Type::deregistered, inst);
  save();
  return true;
}

std::optional<PluginInstance> PluginRegistry::lookup(PluginKind kind, const std::string& plugin_id) const {
  const auto it = instances_.find({kind, plugin_id});
  if (it == instances_.end()) return std::nullopt;
  return it->second;
}

std::vector<PluginInstance> PluginRegistry::list() const {
  std::vector<PluginInstance> out;
  for (const auto& [key, inst] : instances_) out.push_back(inst);
  return out;
}

std::vector<PluginInstance> PluginRegistry::list(PluginKind kind) const {
  std::vector<PluginInstance> out;
  for (const auto& [key, inst] : instances_) {
    if (inst.kind == kind) out.push_back(inst);
  }
  return out;
}

std::unique_ptr<RegistrySubscription> PluginRegistry::subscribe(asio::any_io_executor ex) {
  auto state = std::make_shared<RegistrySubscription::State>(ex);
  subscribers_.push_back(state);
  return std::unique_ptr<RegistrySubscription>(new RegistrySubscription(state));
}

}  // namespace mooring::nodeagent
