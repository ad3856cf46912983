#include "services/controlplane/gc/gc_passes.hpp"

#include <algorithm>

#include "shared/async/periodic.hpp"

namespace mooring::controlplane::gc {

namespace asio = boost::asio;

std::chrono::milliseconds pass_period(std::chrono::milliseconds configured, std::chrono::milliseconds threshold,
                                      int fraction) {
  if (configured.count() > 0) return configured;
  return std::clamp<std::chrono::milliseconds>(threshold / fraction, std::chrono::seconds(1), std::chrono::minutes(5));
}

void start_passes(async::TaskGroup& tasks, const std::string& name, std::chrono::milliseconds period,
                  std::function<void()> pass) {
  // Named locals, not temporaries, as coroutine arguments (GCC 12; docs/engineering-notes.md).
  async::PeriodicOptions options;
  options.name = name;
  options.period = period;
  options.jitter = 0.1;
  options.run_immediately = true;
  std::function<asio::awaitable<void>()> fn = [pass = std::move(pass)]() -> asio::awaitable<void> {
    pass();
    co_return;
  };
  tasks.spawn(name, [fn = std::move(fn), options = std::move(options)]() mutable {
    return async::periodic(std::move(fn), std::move(options));
  });
}

}  // namespace mooring::controlplane::gc
