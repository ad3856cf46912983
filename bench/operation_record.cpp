// Bench: what the durable operation cache adds to one controller call (ControllerPublish /
// ControllerUnpublish with an operation id) on the node agent: the intent record flushed before
// the plugin call and the result record flushed before the answer (two fdatasyncs on the cache's
// own thread; services/nodeagent/rpcserver/operation_log.hpp). The plugin answers at once, so
// what is timed is the cache's own work per call, one call at a time.
// Reference, same run, same calls: the in-memory cache (no file), as before.
// Output: one JSON object on stdout.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "services/nodeagent/rpcserver/operation_cache.hpp"
#include "shared/log/log.hpp"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace mooring;
using namespace mooring::nodeagent;
using json = nlohmann::json;

namespace {

json run(const fs::path& file, int n) {
  asio::io_context io{1};
  OperationCache cache(io.get_executor(), OperationCacheOptions{.file = file});
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  auto body = [&]() -> asio::awaitable<void> {
    for (int i = 0; i < n; ++i) {
      OperationCache::Call call = []() -> asio::awaitable<OperationAnswer> {
        co_return OperationAnswer{grpc::Status::OK, std::string(64, 'c')};  // a publish_context's size
      };
      const auto t0 = bench::Clock::now();
      auto r = co_await cache.run("hostpath publish-" + std::to_string(i), 7, call,
                                  [](const grpc::Status& st) { return st.ok(); });
      us.push_back(bench::us_since(t0));
      if (!r.answer.status.ok()) throw std::runtime_error("call failed");
    }
    co_await cache.shutdown();
  };
  auto done = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  done.get();
  return {{"n", n}, {"p50_us", bench::percentile(us, 50)}, {"p99_us", bench::percentile(us, 99)},
          {"max_us", bench::percentile(us, 100)}};
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  int n = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--n") n = std::stoi(argv[i + 1]);
  }
  if (dir.empty() || n <= 0) {
    std::cerr << "usage: mooring-bench-opcache --dir DIR [--n N]\n";
    return 2;
  }
  log::configure(log::Level::warn, log::Format::text);
  fs::remove_all(dir);
  fs::create_directories(dir);
  json out;
  out["memory"] = run({}, n);
  out["durable"] = run(dir / "operations", n);
  std::cout << out.dump() << "\n";
  fs::remove_all(dir);
  return 0;
}
