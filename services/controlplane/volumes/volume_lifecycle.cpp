#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

VolumeLifecycle::VolumeLifecycle(boost::asio::any_io_executor executor, StateStore& store, ControllerCalls& controller,
                                 RetryRelease retry_release)
    : store_(store),
      controller_(controller),
      retry_release_(std::move(retry_release)),
      tasks_(std::move(executor), "volumes") {}

VolumeLifecycle::~VolumeLifecycle() = default;

boost::asio::awaitable<void> VolumeLifecycle::stop() {
  tasks_.cancel();
  co_await tasks_.join();
}

}  // namespace mooring::controlplane::volumes
