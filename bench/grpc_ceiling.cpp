// Bench reference: plain gRPC round trips (CSI Identity.Probe) over a UNIX socket, with a fixed
// number in flight. The ceiling for a design whose every step is such a round trip: nothing but
// gRPC, protobuf and the plugin's Probe handler. Output: one JSON object on stdout.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "csi/v1/csi.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  csi::v1::Identity::Stub* stub = nullptr;
  long total = 0;
  std::atomic<long> issued{0};
  std::atomic<long> errors{0};
  std::mutex mu;
  std::condition_variable cv;
  long finished = 0;
  std::vector<double> latencies_ms;  // guarded by mu
};

// One in-flight slot: issues a call, and on completion the next one, until `total` are issued.
struct Slot {
  Run* run;
  grpc::ClientContext ctx;
  csi::v1::ProbeRequest req;
  csi::v1::ProbeResponse resp;
  Clock::time_point start;

  static void next(Run* run) {
    if (run->issued.fetch_add(1) >= run->total) return;
    auto* s = new Slot{run};
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s->start = Clock::now();
    run->stub->async()->Probe(&s->ctx, &s->req, &s->resp, [s](grpc::Status st) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s->start).count();
      Run* r = s->run;
      if (!st.ok()) r->errors.fetch_add(1);
      delete s;
      next(r);  // while this call is unfinished, `r` is alive
      // Last touch of `r`, under the lock the waiter holds: once the count is reached it may go.
      std::lock_guard lock(r->mu);
      r->latencies_ms.push_back(ms);
      ++r->finished;
      r->cv.notify_one();
    });
  }
};

nlohmann::json measure(csi::v1::Identity::Stub& stub, long calls, int concurrency) {
  Run run;
  run.stub = &stub;
  run.total = calls;
  run.latencies_ms.reserve(static_cast<std::size_t>(calls));
  const auto t0 = Clock::now();
  for (int i = 0; i < concurrency; ++i) Slot::next(&run);
  {
    std::unique_lock lock(run.mu);
    run.cv.wait(lock, [&] { return run.finished >= calls; });
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard lock(run.mu);
  return {{"calls", calls},
          {"concurrency", concurrency},
          {"seconds", secs},
          {"per_second", static_cast<double>(calls) / secs},
          {"p50_ms", mooring::bench::percentile(run.latencies_ms, 50)},
          {"p99_ms", mooring::bench::percentile(run.latencies_ms, 99)},
          {"errors", run.errors.load()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  long calls = 1000;
  int concurrency = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--socket") socket = v;
    else if (a == "--calls") calls = std::stol(v);
    else if (a == "--concurrency") concurrency = std::stoi(v);
  }
  if (socket.empty() || calls <= 0 || concurrency <= 0) {
    std::cerr << "usage: mooring-bench-grpc --socket PATH [--calls N] [--concurrency C]\n";
    return 2;
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args);
  auto stub = csi::v1::Identity::NewStub(channel);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::cerr << "cannot connect to " << socket << "\n";
    return 1;
  }
  measure(*stub, std::min<long>(calls, 500), concurrency);  // warm-up: connection, allocator
  auto out = measure(*stub, calls, concurrency);
  std::cout << out.dump() << std::endl;
  return out["errors"].get<long>() == 0 ? 0 : 1;
}
