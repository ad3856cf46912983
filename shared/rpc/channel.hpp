// Client channels with Mooring's defaults (fast reconnects to local plugin sockets, keepalive
// on TCP) and a dial-with-timeout that waits on the executor instead of blocking it.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "shared/tls/identity.hpp"

namespace grpc {
class Channel;
}

namespace mooring::rpc {

class TransportSecurity;

// "unix:///p" and "unix:/p" stay as they are; an absolute path "/p" becomes "unix:///p";
// anything else is taken as a gRPC target such as "host:port".
std::string normalize_target(std::string_view endpoint);
bool is_unix_target(std::string_view target);

// The longest reconnect backoff of a channel to a UNIX socket (see make_channel).
inline constexpr std::chrono::milliseconds kUnixMaxReconnectBackoff{250};

struct ChannelOptions {
  // Reconnect quickly: a restarted plugin re-creates its socket within moments.
  std::chrono::milliseconds initial_reconnect_backoff{100};
  std::chrono::milliseconds max_reconnect_backoff{std::chrono::seconds(5)};
  // grpc.min_reconnect_backoff_ms: gRPC also uses it as the minimum deadline of one connect attempt.
  std::chrono::milliseconds min_reconnect_backoff{std::chrono::seconds(1)};
  // TCP only (pings during calls; a dead peer is noticed mid-watch): 0 disables.
  std::chrono::milliseconds keepalive_time{std::chrono::seconds(30)};
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(10)};
  // A private subchannel pool, so a new channel really dials anew instead of sharing a
  // subchannel that sits in reconnect backoff.
  bool private_subchannels = true;
  int max_receive_message_bytes = 16 * 1024 * 1024;
  // Mutual TLS on TCP targets (null: plaintext): the peer must present a certificate from the CA
  // carrying `peer` (transport_security.hpp). UNIX-socket targets ignore both.
  std::shared_ptr<const TransportSecurity> security;
  tls::Identity peer{tls::Role::server, {}};
};

std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoint, const ChannelOptions& options);
// With the defaults. An overload, not a default argument: GCC 12 mis-destroys a default
// argument's temporary with a non-trivial destructor inside a co_await full-expression
// (`co_await wait_connected(make_channel(p), t)` freed a bad pointer under ASan).
std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoint);

// Starts connecting and waits until the channel is READY (true) or `timeout` passes (false).
// Cancelling the awaiting coroutine returns false promptly. The executor is never blocked.
boost::asio::awaitable<bool> wait_connected(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout);

}  // namespace mooring::rpc
