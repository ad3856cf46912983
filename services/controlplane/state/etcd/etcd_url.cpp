// The etcd state URL (--state etcd://...): parsed into EtcdOptions and written back for logs.
#include "services/controlplane/state/etcd/etcd_options.hpp"

#include "shared/config/host_port.hpp"

namespace mooring::controlplane {

using domain::error;

domain::Expected<EtcdOptions> parse_etcd_url(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme))
    return error("state URL \"" + std::string(url) + "\": expected etcd://host:port[,host:port...][/prefix]");
  std::string_view rest = url.substr(kScheme.size());
  EtcdOptions o;
  const auto slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string prefix(rest.substr(slash));
    while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
    if (prefix != "/") o.prefix = prefix;
  }
  while (!hosts.empty()) {
    const auto comma = hosts.find(',');
    std::string_view h = hosts.substr(0, comma);
    if (!config::parse_host_port(h))
      return error("state URL \"" + std::string(url) + "\": endpoint \"" + std::string(h) + "\" is not host:port");
    o.endpoints.emplace_back(h);
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
  }
  if (o.endpoints.empty()) return error("state URL \"" + std::string(url) + "\": no endpoint");
  return o;
}

std::string to_url(const EtcdOptions& o) {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < o.endpoints.size(); ++i) out += (i ? "," : "") + o.endpoints[i];
  return out + o.prefix;
}

}  // namespace mooring::controlplane
