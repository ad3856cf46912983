#include "services/nodeagent/allocrunner/alloc_state.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "shared/durable/durable_file.hpp"
#include "shared/domain/ids.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

const log::Logger kLog{"alloc-state"};

}  // namespace

std::string encode(const AllocState& s) {
  std::string alloc_json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  auto proto = domain::to_proto(s.alloc);
  const bool withheld = s.secret_env_pending || !proto.task().secret_env().empty();
  proto.mutable_task()->clear_secret_env();  // never on disk in plain text; fetched again after a restart
  if (!s.alloc.task) proto.clear_task();
  (void)google::protobuf::util::MessageToJsonString(proto, &alloc_json, opts);
  json j;
  j["alloc"] = json::parse(alloc_json);
  if (withheld) j["secret_env_withheld"] = true;
  j["client_status"] = std::string(domain::to_string(s.client_status));
  j["task_started"] = s.task_started;
  if (!s.launch_id.empty()) j["launch_id"] = s.launch_id;
  if (s.task) j["task"] = {{"pid", s.task->pid}, {"start_ticks", s.task->start_ticks}};
  j["task_result"] = s.task_result;
  j["stop_reason"] = s.stop_reason;
  j["postrun_done"] = s.postrun_done;
  j["claimed_volumes"] = s.claimed_volumes;
  return j.dump(2);
}

domain::Expected<AllocState> decode_alloc_state(const std::string& text) {
  try {
    const auto j = json::parse(text);
    ::mooring::v1::Allocation proto;
    google::protobuf::util::JsonParseOptions popts;
    popts.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(j.at("alloc").dump(), &proto, popts).ok())
      return domain::error("allocation state: field \"alloc\" is not an allocation");
    auto alloc = domain::from_proto(proto);
    if (!alloc) return domain::error("allocation state: " + alloc.error());
    AllocState s;
    s.alloc = std::move(*alloc);
    const auto status = domain::parse_client_status(j.at("client_status").get<std::string>());
    if (!status) return domain::error("allocation state: bad client_status");
    s.client_status = *status;
    s.task_started = j.value("task_started", false);
    s.launch_id = j.value("launch_id", "");
    if (j.contains("task")) {
      s.task = TaskHandle{j["task"].at("pid").get<pid_t>(), j["task"].at("start_ticks").get<std::uint64_t>()};
    }
    s.task_result = j.value("task_result", "");
    s.stop_reason = j.value("stop_reason", "");
    s.postrun_done = j.value("postrun_done", false);
    s.claimed_volumes = j.value("claimed_volumes", std::vector<std::string>{});
    s.secret_env_pending = j.value("secret_env_withheld", false);
    return s;
  } catch (const json::exception& e) {
    return domain::error(std::string("allocation state: ") + e.what());
  }
}

AllocStateStore::AllocStateStore(fs::path dir)
    : dir_(std::move(dir)), writer_(std::make_unique<async::SerialWorker>("allocation-states")) {}

AllocStateStore::~AllocStateStore() = default;

// Keyed by allocation: only the newest state of an allocation that waits in the queue is written.
void AllocStateStore::submit(const AllocState& state) {
  writer_->submit(state.alloc.id, [this, state] {
    if (auto st = save(state); !st)
      kLog.error("cannot persist the allocation state", {{"alloc", state.alloc.id}, {"error", st.error()}});
  });
}

void AllocStateStore::submit_remove(const std::string& alloc_id) {
  writer_->submit(alloc_id, [this, alloc_id] {
    if (auto st = remove(alloc_id); !st)
      kLog.warn("cannot remove the allocation's directory", {{"alloc", alloc_id}, {"error", st.error()}});
  });
}

void AllocStateStore::submit_write(const std::string& key, std::function<void()> write) {
  writer_->submit("/" + key, std::move(write));
}

asio::awaitable<void> AllocStateStore::durable() { return writer_->drained(); }

asio::awaitable<void> AllocStateStore::after_durable(std::function<void()> job) { return writer_->run(std::move(job)); }

void AllocStateStore::wait_durable() { writer_->wait_drained(); }

domain::Expected<fs::path> AllocStateStore::alloc_dir(const std::string& alloc_id) const {
  if (auto st = domain::validate_allocation_id(alloc_id); !st) return domain::error(st.error());
  return dir_ / alloc_id;
}

domain::Status AllocStateStore::save(const AllocState& state) {
  auto dir = alloc_dir(state.alloc.id);
  if (!dir) return domain::error(dir.error());
  // Saved about six times per allocation: one mkdir answers "there already" (EEXIST). Only a
  // new directory is set to 0700 exactly (mkdir applies the umask), with its parents if need be.
  std::error_code ec;
  if (::mkdir(dir->c_str(), 0700) == 0) {
    fs::permissions(*dir, fs::perms::owner_all, ec);
  } else if (errno == ENOENT) {
    fs::create_directories(*dir, ec);
    if (ec) return domain::error("cannot create " + dir->string() + ": " + ec.message());
    fs::permissions(*dir, fs::perms::owner_all, ec);
  } else if (errno != EEXIST) {
    return domain::error("cannot create " + dir->string() + ": " + std::strerror(errno));
  }
  if (const auto wec = durable::write_durable(*dir / "state.json", encode(state)))
    return domain::error("cannot write the state of allocation " + state.alloc.id + ": " + wec.message());
  return {};
}

domain::Status AllocStateStore::remove(const std::string& alloc_id) {
  auto dir = alloc_dir(alloc_id);
  if (!dir) return domain::error(dir.error());
  // The state first, so a crash part way leaves the last state or none, never an older one.
  if (auto ec = durable::remove_durable(*dir / "state.json"))
    return domain::error("cannot remove the state of allocation " + alloc_id + ": " + ec.message());
  std::error_code ec;
  fs::remove_all(*dir, ec);
  if (ec) return domain::error("cannot remove " + dir->string() + ": " + ec.message());
  return {};
}

std::vector<AllocState> AllocStateStore::load_all() const {
  std::vector<AllocState> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory()) continue;
    const auto file = it->path() / "state.json";
    std::error_code rec;
    const auto text = durable::read_durable(file, rec);
    if (!text) {
      if (rec) kLog.error("cannot read an allocation state", {{"file", file.string()}, {"error", rec.message()}});
      continue;
    }
    auto state = decode_alloc_state(*text);
    if (!state) {
      kLog.error("unreadable allocation state left in place", {{"file", file.string()}, {"error", state.error()}});
      continue;
    }
    if (state->alloc.id != it->path().filename().string()) {
      kLog.error("allocation state in the wrong directory", {{"file", file.string()}});
      continue;
    }
    out.push_back(std::move(*state));
  }
  return out;
}

}  // namespace mooring::nodeagent
