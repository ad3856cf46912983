#include "services/controlplane/http/router.hpp"

#include "services/controlplane/http/query.hpp"

namespace mooring::controlplane::http {

std::vector<std::string_view> split_path(std::string_view path) {
  // Empty inner segments are kept ("/a//b" has three), so "/v1/volume/csi//create" can never
  // match ":id" = "create"; one leading and one trailing slash are ignored.
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return out;
  std::size_t i = 0;
  while (true) {
    auto next = path.find('/', i);
    if (next == std::string_view::npos) {
      out.push_back(path.substr(i));
      break;
    }
    out.push_back(path.substr(i, next - i));
    i = next + 1;
  }
  return out;
}

std::optional<std::string> decode_path_segment(std::string_view s) {
  // '+' is a literal plus in a path, unlike in a query.
  return percent_decode(s, false);
}

}  // namespace mooring::controlplane::http
