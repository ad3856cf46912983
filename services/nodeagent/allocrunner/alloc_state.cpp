#include "services/nodeagent/allocrunner/alloc_state.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "shared/durable/durable_file.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/proto_convert.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

const log::Logger& logger() {
  static const log::Logger l{"alloc-state"};
  return l;
}

}  // namespace

std::string encode(const AllocState& s) {
  std::string alloc_json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(domain::to_proto(s.alloc), &alloc_json, opts);
  json j;
  j["alloc"] = json::parse(alloc_json);
  j["client_status"] = std::string(domain::to_string(s.client_status));
  j["task_started"] = s.task_started;
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
    if (j.contains("task")) {
      s.task = TaskHandle{j["task"].at("pid").get<pid_t>(), j["task"].at("start_ticks").get<std::uint64_t>()};
    }
    s.task_result = j.value("task_result", "");
    s.stop_reason = j.value("stop_reason", "");
    s.postrun_done = j.value("postrun_done", false);
    s.claimed_volumes = j.value("claimed_volumes", std::vector<std::string>{});
    return s;
  } catch (const json::exception& e) {
    return domain::error(std::string("allocation state: ") + e.what());
  }
}

struct AllocStateStore::Writer {
  struct Job {
    std::string alloc_id;             // empty: a fence; '/'-prefixed: another file (submit_write)
    std::optional<AllocState> state;  // with an id: the state to write; none: remove the directory
    std::function<void()> done;       // a fence: called on the writer thread once it is reached;
                                      // another file: its write
  };
  std::mutex mutex;
  std::condition_variable wake;
  std::list<Job> queue;
  std::map<std::string, std::list<Job>::iterator> waiting;  // alloc id -> its job, not started yet
  bool stopping = false;
  std::thread thread;
  // Fences resume their coroutine through the executor only while the store lives.
  std::shared_ptr<int> alive = std::make_shared<int>(0);

  void queue_write(const std::string& key, std::optional<AllocState> state, std::function<void()> write = {}) {
    {
      std::lock_guard lock(mutex);
      if (auto it = waiting.find(key); it != waiting.end()) {
        // Only the newest intent of an allocation (or content of a file) matters.
        it->second->state = std::move(state);
        it->second->done = std::move(write);
      } else {
        queue.push_back(Job{key, std::move(state), std::move(write)});
        waiting[key] = std::prev(queue.end());
      }
    }
    wake.notify_one();
  }
};

AllocStateStore::AllocStateStore(fs::path dir) : dir_(std::move(dir)), writer_(std::make_unique<Writer>()) {
  writer_->thread = std::thread([this] {
    auto& w = *writer_;
    std::unique_lock lock(w.mutex);
    for (;;) {
      w.wake.wait(lock, [&] { return w.stopping || !w.queue.empty(); });
      if (w.queue.empty()) return;  // stopping, and everything queued is written
      Writer::Job job = std::move(w.queue.front());
      w.queue.pop_front();
      if (!job.alloc_id.empty()) w.waiting.erase(job.alloc_id);
      lock.unlock();
      try {  // nothing may end the thread: later writes and fences would never complete
        if (job.done) {  // a fence, or another file's write
          job.done();
        } else if (job.state) {
          if (auto st = save(*job.state); !st)
            logger().error("cannot persist the allocation state", {{"alloc", job.alloc_id}, {"error", st.error()}});
        } else if (auto st = remove(job.alloc_id); !st) {
          logger().warn("cannot remove the allocation's directory", {{"alloc", job.alloc_id}, {"error", st.error()}});
        }
      } catch (const std::exception& e) {
        logger().error("allocation state write failed", {{"alloc", job.alloc_id}, {"error", e.what()}});
      }
      lock.lock();
    }
  });
}

AllocStateStore::~AllocStateStore() {
  {
    std::lock_guard lock(writer_->mutex);
    writer_->stopping = true;
  }
  writer_->wake.notify_one();
  writer_->thread.join();
}

void AllocStateStore::submit(const AllocState& state) { writer_->queue_write(state.alloc.id, state); }

void AllocStateStore::submit_remove(const std::string& alloc_id) { writer_->queue_write(alloc_id, std::nullopt); }

void AllocStateStore::submit_write(const std::string& key, std::function<void()> write) {
  writer_->queue_write("/" + key, std::nullopt, std::move(write));
}

void AllocStateStore::enqueue_fence(std::function<void()> done) {
  {
    std::lock_guard lock(writer_->mutex);
    writer_->queue.push_back(Writer::Job{{}, std::nullopt, std::move(done)});
  }
  writer_->wake.notify_one();
}

asio::awaitable<void> AllocStateStore::durable() {
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [this](auto handler) {
        using Handler = decltype(handler);
        auto h = std::make_shared<Handler>(std::move(handler));
        // Tracked: the io_context keeps running while a fence is in the writer's queue.
        auto ex = asio::prefer(asio::get_associated_executor(*h), asio::execution::outstanding_work.tracked);
        std::weak_ptr<int> alive = writer_->alive;
        enqueue_fence([h, ex, alive]() {
          asio::post(ex, [h, alive]() {
            if (alive.lock()) (*h)();
          });
        });
      },
      asio::use_awaitable);
}

void AllocStateStore::wait_durable() {
  std::promise<void> reached;
  enqueue_fence([&reached] { reached.set_value(); });
  reached.get_future().wait();
}

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
      if (rec) logger().error("cannot read an allocation state", {{"file", file.string()}, {"error", rec.message()}});
      continue;
    }
    auto state = decode_alloc_state(*text);
    if (!state) {
      logger().error("unreadable allocation state left in place", {{"file", file.string()}, {"error", state.error()}});
      continue;
    }
    if (state->alloc.id != it->path().filename().string()) {
      logger().error("allocation state in the wrong directory", {{"file", file.string()}});
      continue;
    }
    out.push_back(std::move(*state));
  }
  return out;
}

}  // namespace mooring::nodeagent
