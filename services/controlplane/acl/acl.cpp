#include "services/controlplane/acl/acl.hpp"

#include <algorithm>
#include <limits>

namespace mooring::controlplane::acl {

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with one backtrack point: linear in practice, no recursion.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Acl Acl::management() {
  Acl a;
  a.management_ = true;
  return a;
}

Acl Acl::from_policies(const std::vector<const Policy*>& policies) {
  Acl a;
  for (const Policy* p : policies) {
    for (const auto& [pattern, rule] : p->namespaces) {
      auto& m = (pattern.find('*') == std::string::npos ? a.exact_ : a.globs_)[pattern];
      auto caps = granted(rule);
      m.caps.insert(caps.begin(), caps.end());
      m.deny = m.deny || denies(rule);
    }
    for (auto [area, rule] : {std::pair{Area::plugin, &p->plugin}, std::pair{Area::node, &p->node},
                              std::pair{Area::operator_, &p->operator_}}) {
      if (!*rule) continue;
      auto& m = a.areas_[area];
      m.level = std::max(m.level, (*rule)->level);
      m.deny = m.deny || (*rule)->deny;
    }
  }
  return a;
}

std::set<Capability> Acl::capabilities(std::string_view ns) const {
  if (management_) return {kAllCapabilities.begin(), kAllCapabilities.end()};
  if (auto it = exact_.find(ns); it != exact_.end()) return it->second.deny ? std::set<Capability>{} : it->second.caps;
  // The closest globs: the fewest characters left to the wildcards.
  std::size_t best = std::numeric_limits<std::size_t>::max();
  Merged merged;
  for (const auto& [pattern, m] : globs_) {
    if (!glob_match(pattern, ns)) continue;
    const auto literal = pattern.size() - static_cast<std::size_t>(std::count(pattern.begin(), pattern.end(), '*'));
    const auto difference = ns.size() - literal;
    if (difference > best) continue;
    if (difference < best) merged = {};
    best = difference;
    merged.caps.insert(m.caps.begin(), m.caps.end());
    merged.deny = merged.deny || m.deny;
  }
  return merged.deny ? std::set<Capability>{} : merged.caps;
}

bool Acl::allows(Capability c, std::string_view ns) const {
  if (ns == "*") return allows_somewhere(c);
  return capabilities(ns).contains(c);
}

bool Acl::allows_somewhere(Capability c) const {
  if (management_) return true;
  for (const auto* rules : {&exact_, &globs_})
    for (const auto& [pattern, m] : *rules)
      if (!m.deny && m.caps.contains(c)) return true;
  return false;
}

Level Acl::level(Area a) const {
  if (management_) return Level::write;
  auto it = areas_.find(a);
  if (it == areas_.end() || it->second.deny) return Level::none;
  return it->second.level;
}

std::optional<std::string> Acl::missing(const Need& need, std::string_view ns) const {
  switch (need.kind) {
    case Need::Kind::anyone:
    case Need::Kind::any_token:
    case Need::Kind::filtered: return std::nullopt;
    case Need::Kind::management:
      if (management_) return std::nullopt;
      break;
    case Need::Kind::capability:
      if (allows(need.capability, ns)) return std::nullopt;
      break;
    case Need::Kind::area:
      if (level(need.area) >= need.level) return std::nullopt;
      break;
    case Need::Kind::unset: break;
  }
  return describe(need);
}

}  // namespace mooring::controlplane::acl
