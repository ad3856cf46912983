#include "services/controlplane/api/list_query.hpp"

#include <charconv>

namespace mooring::controlplane::api {

domain::Expected<ListQuery> parse_list_query(const http::QueryParams& query) {
  ListQuery q;
  if (auto it = query.find("prefix"); it != query.end()) q.prefix = it->second;
  if (auto it = query.find("next_token"); it != query.end()) q.next_token = it->second;
  if (auto it = query.find("per_page"); it != query.end()) {
    const auto& s = it->second;
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || end != s.data() + s.size() || n == 0 || n > kMaxPerPage)
      return domain::error("query parameter \"per_page\": must be an integer from 1 to " + std::to_string(kMaxPerPage) +
                           ", got \"" + s + "\"");
    q.per_page = n;
  }
  return q;
}

}  // namespace mooring::controlplane::api
