// API room: Nomad-style list parameters — `prefix`, `per_page`, `next_token` — and pagination
// over id-sorted maps. The next token is the id of the first item of the next page, so a page
// stays correct when items before it are deleted.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "services/controlplane/http/message.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::api {

inline constexpr std::size_t kMaxPerPage = 1000;

struct ListQuery {
  std::string prefix;
  std::size_t per_page = 0;  // 0: no paging, everything in one answer
  std::string next_token;
};

// Errors name the parameter: `query parameter "per_page": must be a positive integer`.
domain::Expected<ListQuery> parse_list_query(const http::QueryParams& query);

template <class T>
struct Page {
  std::vector<const T*> items;
  std::string next_token;  // empty on the last page
};

// Items whose id starts with the prefix, from next_token on, that pass `keep`, at most per_page.
template <class T, class Keep>
Page<T> paginate(const std::map<std::string, T>& items, const ListQuery& q, Keep keep) {
  Page<T> page;
  auto start = q.next_token > q.prefix ? q.next_token : q.prefix;
  for (auto it = items.lower_bound(start); it != items.end(); ++it) {
    if (it->first.compare(0, q.prefix.size(), q.prefix) != 0) break;
    if (!keep(it->second)) continue;
    if (q.per_page > 0 && page.items.size() == q.per_page) {
      page.next_token = it->first;
      break;
    }
    page.items.push_back(&it->second);
  }
  return page;
}

}  // namespace mooring::controlplane::api
