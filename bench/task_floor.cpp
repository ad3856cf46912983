// Bench reference: the lifecycle's task alone. Each lifecycle starts one task process (the bench's
// `sh -c 'echo ok > "$MOORING_VOLUME_DATA/bench" && exec sleep 600'`); here the same shell writes
// its file and exits, `concurrency` at a time, started as the agent starts a task without walls
// (spawn_process: posix_spawn into a session of its own). No design that runs a real task per
// lifecycle can go through lifecycles faster than this.
// --walls: the same task started as the agent starts a task behind its walls (issue 41:
// process/walls.hpp, as nobody in its own namespaces, root and init, its slot bound in), so the
// two runs give what isolation adds to a task start. Output: one JSON object on stdout.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "services/nodeagent/process/walls.hpp"

namespace {

using mooring::bench::Clock;
const char* const kScript = "echo ok > \"$MOORING_VOLUME_DATA/bench\"";

// One task: started as the agent starts a task without walls (spawn_process: posix_spawn, its own
// session, nothing but 0..2 inherited), then waited for. False when it could not start or did not
// exit cleanly.
bool run_task(const std::filesystem::path& file) {
  mooring::nodeagent::SpawnRequest req;
  req.program = "/bin/sh";
  req.argv = {"sh", "-c", kScript};
  req.env = {{"PATH", "/usr/bin:/bin"}, {"MOORING_VOLUME_DATA", file.string()}};
  req.isolation = mooring::nodeagent::SpawnRequest::Isolation::own_session;
  const auto pid = mooring::nodeagent::spawn_process(req);
  if (!pid) return false;
  int status = 0;
  if (::waitpid(*pid, &status, 0) != *pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The same task behind the walls: the init reports the task's own exit.
bool run_walled_task(const std::filesystem::path& slot) {
  const auto file = slot / "data";
  std::filesystem::create_directories(slot / "root");
  std::filesystem::create_directories(file);
  ::chown(file.c_str(), 65534, 65534);
  mooring::nodeagent::SpawnRequest req;
  req.program = "/bin/sh";
  req.argv = {"sh", "-c", kScript};
  req.env = {{"PATH", "/usr/bin:/bin"}, {"MOORING_VOLUME_DATA", file.string()}};
  mooring::nodeagent::Walls walls;
  walls.uid = walls.gid = 65534;
  walls.root = slot / "root";
  walls.binds = {{file, false}};
  auto started = mooring::nodeagent::spawn_walled(req, walls);
  auto* child = std::get_if<mooring::nodeagent::WalledChild>(&started);
  if (!child) return false;
  int st = 0;
  ::waitpid(child->pid, &st, 0);
  const auto status = mooring::nodeagent::read_task_status(child->report);
  ::close(child->report);
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 1000;
  int concurrency = 8;
  std::string dir;
  bool walled = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--walls") {
      walled = true;
      continue;
    }
    if (i + 1 >= argc) break;
    std::string a = argv[i], v = argv[++i];
    if (a == "--calls")
      calls = std::stol(v);
    else if (a == "--concurrency")
      concurrency = std::stoi(v);
    else if (a == "--dir")
      dir = v;
  }
  if (dir.empty() || calls <= 0 || concurrency <= 0) {
    std::cerr << "usage: mooring-bench-task --dir DIR [--calls N] [--concurrency C] [--walls]\n";
    return 2;
  }
  std::atomic<long> next{0};
  std::atomic<long> errors{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  latencies_ms.reserve(static_cast<std::size_t>(calls));
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (long i = next++; i < calls; i = next++) {
        const auto slot = std::filesystem::path(dir) / ("task-" + std::to_string(i % 64));
        std::filesystem::create_directories(slot);
        const auto start = Clock::now();
        if (!(walled ? run_walled_task(slot) : run_task(slot))) ++errors;
        const double ms = mooring::bench::ms_since(start);
        std::lock_guard lock(mu);
        latencies_ms.push_back(ms);
      }
    });
  }
  for (auto& t : workers) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  nlohmann::json out{{"calls", calls},
                     {"walls", walled},
                     {"concurrency", concurrency},
                     {"seconds", secs},
                     {"per_second", static_cast<double>(calls) / secs},
                     {"p50_ms", mooring::bench::percentile(latencies_ms, 50)},
                     {"p99_ms", mooring::bench::percentile(latencies_ms, 99)},
                     {"errors", errors.load()}};
  std::cout << out.dump() << std::endl;
  return errors.load() == 0 ? 0 : 1;
}
