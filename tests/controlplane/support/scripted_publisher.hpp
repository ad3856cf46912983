// Test support: a ControllerPublisher that answers from a script (OK with a publish context when
// the script is empty) after an optional delay, and records its calls and how many overlapped.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/claims/controller_publisher.hpp"

namespace mooring::controlplane {

class ScriptedPublisher final : public ControllerPublisher {
 public:
  struct Call {
    std::string volume_id;
    std::string allocation_id;
    std::string csi_node_id;
    domain::Claim claim;  // as the publisher was given it (the committed intent)
  };

  boost::asio::awaitable<PublishResult> publish(const domain::Volume& volume, const domain::Claim& claim,
                                                std::string csi_node_id) override {
    calls.push_back({volume.id, claim.allocation_id, std::move(csi_node_id), claim});
    max_in_flight = std::max(max_in_flight, ++in_flight);
    if (delay.count() > 0) {
      boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, delay);
      co_await t.async_wait(boost::asio::use_awaitable);
    }
    --in_flight;
    ++answered;
    if (script.empty()) {
      PublishResult ok;
      ok.publish_context = {{"device", "/dev/fake-" + volume.id}};
      co_return ok;
    }
    PublishResult next = script.front();
    script.pop_front();
    co_return next;
  }

  static PublishResult failure(grpc::StatusCode code, bool sent = true) {
    PublishResult r;
    r.status = grpc::Status(code, "scripted");
    r.sent = sent;
    return r;
  }

  std::deque<PublishResult> script;
  std::chrono::milliseconds delay{0};
  std::vector<Call> calls;
  int in_flight = 0;
  int max_in_flight = 0;
  int answered = 0;  // calls that ran to their answer (not cancelled)
};

}  // namespace mooring::controlplane
