#include "shared/domain/leader_epoch.hpp"

#include <charconv>

namespace mooring::domain {

std::string LeaderEpoch::to_text() const {
  char buf[48];
  auto end = std::to_chars(buf, buf + sizeof buf, cluster, 16).ptr;
  *end++ = '/';
  end = std::to_chars(end, buf + sizeof buf, revision).ptr;
  return std::string(buf, end);
}

std::optional<LeaderEpoch> LeaderEpoch::parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  LeaderEpoch e;
  const auto cluster = text.substr(0, slash), revision = text.substr(slash + 1);
  auto c = std::from_chars(cluster.data(), cluster.data() + cluster.size(), e.cluster, 16);
  if (c.ec != std::errc{} || c.ptr != cluster.data() + cluster.size()) return std::nullopt;
  if (revision.front() == '-' || revision.front() == '+') return std::nullopt;
  auto r = std::from_chars(revision.data(), revision.data() + revision.size(), e.revision);
  if (r.ec != std::errc{} || r.ptr != revision.data() + revision.size()) return std::nullopt;
  return e;
}

}  // namespace mooring::domain
