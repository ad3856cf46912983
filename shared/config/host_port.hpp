// "HOST:PORT" as every listener and endpoint flag takes it: a name or an address, "[::1]:4700"
// for IPv6 (the brackets are not part of the host), a decimal port 0-65535.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mooring::config {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// Empty when `addr` is not HOST:PORT (no host, no port, or a port that is not 0-65535).
std::optional<HostPort> parse_host_port(std::string_view addr);
// The other way: "host:port", or "[host]:port" when the host is an IPv6 address.
std::string to_string(const HostPort& where);

}  // namespace mooring::config
