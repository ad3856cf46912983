#include "shared/config/host_port.hpp"

namespace mooring::config {

std::optional<HostPort> parse_host_port(std::string_view addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string_view digits = addr.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  unsigned long port = 0;
  for (const char c : digits) port = port * 10 + static_cast<unsigned long>(c - '0');
  if (port > 65535) return std::nullopt;
  return HostPort{.host = std::string(host), .port = static_cast<std::uint16_t>(port)};
}

std::string to_string(const HostPort& where) {
  const bool v6 = where.host.find(':') != std::string::npos;
  return (v6 ? "[" + where.host + "]" : where.host) + ":" + std::to_string(where.port);
}

}  // namespace mooring::config
