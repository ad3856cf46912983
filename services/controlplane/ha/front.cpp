#include "services/controlplane/ha/front.hpp"

#include <nlohmann/json.hpp>

#include "services/controlplane/ha/forwarder.hpp"
#include "services/controlplane/ha/leader_election.hpp"
#include "services/controlplane/ha/lease_hold.hpp"

namespace mooring::controlplane::ha {

namespace {

bool has_header(const http::Response& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      return true;
  return false;
}

// The caller of a forwarded request, believed from a control plane only (see front.hpp).
void take_forwarded_caller(http::Request& request) {
  const auto forwarded_for = request.headers.find(kForwardedFor);
  if (request.peer_control_plane && forwarded_for != request.headers.end() && !forwarded_for->second.empty()) {
    const auto by = request.headers.find(kForwardedBy);
    request.via = by != request.headers.end() && !by->second.empty() ? by->second : request.remote;
    request.remote = forwarded_for->second;
  }
  std::erase_if(request.headers, [](const auto& h) { return h.first.starts_with(kForwardedPrefix); });
}

http::Response unavailable(const std::string& why) {
  auto r = http::error_response(503, why);
  r.set_header("Retry-After", "1");
  return r;
}

}  // namespace

std::string Front::not_serving_reason() const {
  if (election_.leading()) return "this control plane was just elected leader and is loading the state";
  if (auto problem = election_.etcd_problem(); !problem.empty()) return "waiting for etcd: " + problem;
  if (auto leader = election_.leader()) return "this control plane is a standby; the leader is at " + leader->http_addr;
  return "this control plane is a standby and no leader is elected yet";
}

boost::asio::awaitable<http::Response> Front::degraded(http::Request request) {
  using namespace std::chrono;
  const auto stale = duration_cast<milliseconds>(steady_clock::now() - election_.last_confirmed());
  const std::string since = std::to_string(duration_cast<seconds>(stale).count()) + " s";
  const std::string why =
      "etcd has no quorum or cannot be reached (a majority of its members down or cut off from "
      "this control plane?); etcd last confirmed this leader " +
      since + " ago";
  auto mark = [&](http::Response r) {
    r.set_header("X-Mooring-Stale", std::to_string(duration_cast<seconds>(stale).count()));
    return r;
  };
  if (request.path == "/v1/status/ready") co_return mark(unavailable("not ready: " + why + "; writes are refused"));
  const bool read = request.method == "GET" || request.method == "HEAD" || request.method == "OPTIONS";
  if (!read)  // after hold_write(): the outage outlasted the hold
    co_return mark(unavailable(why + ": writes are refused until it answers again; nothing was changed"));
  if (stale > stale_reads_max_)
    co_return mark(unavailable(why + ": reads from this control plane's memory are refused after --stale-reads-max (" +
                               std::to_string(duration_cast<seconds>(stale_reads_max_).count()) + " s)"));
  co_return mark(co_await api_(std::move(request)));
}

boost::asio::awaitable<http::Response> Front::handle(http::Request request) {
  const bool write = request.method != "GET" && request.method != "HEAD" && request.method != "OPTIONS";
  if (write && serving_()) (void)co_await hold_.wait_while_unconfirmed();  // then as below
  const auto leader = election_.leader();
  const bool serving = serving_();
  auto sign = [&](http::Response r) {
    if (leader && !has_header(r, "X-Mooring-Leader")) r.set_header("X-Mooring-Leader", leader->http_addr);
    return r;
  };
  if (request.method == "GET" && request.path == "/v1/status/leader") {
    if (!leader) co_return unavailable("no leader: " + not_serving_reason());
    co_return sign(http::json_response(nlohmann::json(leader->http_addr).dump()));
  }
  take_forwarded_caller(request);
  if (serving && (election_.degraded() || election_.unconfirmed()))
    co_return sign(co_await degraded(std::move(request)));
  if (request.method == "GET" && request.path == "/v1/status/ready" && !serving)
    co_return sign(unavailable(not_serving_reason()));
  if (request.method == "GET" && request.path == "/v1/status/health") co_return sign(co_await api_(std::move(request)));
  if (serving) co_return sign(co_await api_(std::move(request)));
  if (!leader || election_.leading()) co_return unavailable(not_serving_reason());
  auto forwarded = co_await forwarder_.forward(leader->http_addr, std::move(request), self_);
  if (!forwarded.answered) election_.recheck();
  co_return sign(std::move(forwarded.response));
}

}  // namespace mooring::controlplane::ha
