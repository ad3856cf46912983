// HTTP room: a small router. Patterns are literal segments and `:name` parameters
// ("/v1/volume/csi/:id/create"); a path that matches a pattern under another method yields 405 with
// the Allow list. Segments are percent-decoded after splitting, so "%2F" can never create a segment.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane::http {

// Splits "/a/b/c" into raw (still encoded) segments; a trailing slash is ignored.
std::vector<std::string_view> split_path(std::string_view path);

template <class Target>
class Router {
 public:
  struct Match {
    const Target* target = nullptr;  // set when found
    PathParams params;
    bool path_known = false;    // some route has this path (405 vs 404)
    std::string allow;          // "GET, PUT" when path_known and not found
    bool bad_encoding = false;  // a segment had a malformed escape
  };

  void add(std::string method, std::string_view pattern, Target target) {
    routes_.push_back(make(std::move(method), pattern, std::move(target)));
  }
  // Like add, but wins over every route added before it for the same method and path.
  void add_first(std::string method, std::string_view pattern, Target target) {
    routes_.insert(routes_.begin(), make(std::move(method), pattern, std::move(target)));
  }

  Match match(std::string_view method, std::string_view path) const {
    Match m;
    auto raw = split_path(path);
    std::vector<std::string> segs;
    for (auto s : raw) {
      auto d = decode_segment(s);
      if (!d) {
        m.bad_encoding = true;
        return m;
      }
      segs.push_back(std::move(*d));
    }
    std::vector<std::string> allowed;
    for (const auto& r : routes_) {
      PathParams params;
      if (!matches(r, segs, params)) continue;
      if (r.method == method || (method == "HEAD" && r.method == "GET")) {
        if (!m.target) {
          m.target = &r.target;
          m.params = std::move(params);
        }
      }
      m.path_known = true;
      bool dup = false;
      for (const auto& a : allowed) dup = dup || a == r.method;
      if (!dup) allowed.push_back(r.method);
    }
    if (m.target) return m;
    for (std::size_t i = 0; i < allowed.size(); ++i) m.allow += (i ? ", " : "") + allowed[i];
    if (m.path_known) m.allow += ", OPTIONS";
    return m;
  }

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Target target;
  };

  static Route make(std::string method, std::string_view pattern, Target target) {
    Route r;
    r.method = std::move(method);
    for (auto seg : split_path(pattern)) r.segments.emplace_back(seg);
    r.target = std::move(target);
    return r;
  }
  static std::optional<std::string> decode_segment(std::string_view s);

  static bool matches(const Route& r, const std::vector<std::string>& segs, PathParams& params) {
    if (r.segments.size() != segs.size()) return false;
    for (std::size_t i = 0; i < segs.size(); ++i) {
      const auto& p = r.segments[i];
      if (!p.empty() && p.front() == ':') {
        if (segs[i].empty()) return false;
        params[p.substr(1)] = segs[i];
      } else if (p != segs[i]) {
        return false;
      }
    }
    return true;
  }

  std::vector<Route> routes_;
};

std::optional<std::string> decode_path_segment(std::string_view s);

template <class Target>
std::optional<std::string> Router<Target>::decode_segment(std::string_view s) {
  return decode_path_segment(s);
}

}  // namespace mooring::controlplane::http
