#include "shared/domain/task_user.hpp"

#include <charconv>

namespace mooring::domain {
namespace {

std::optional<std::uint32_t> parse_id(std::string_view s) {
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// POSIX portable user names, as useradd takes them: letters, digits, '.', '_', '-', not first '-'.
bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 32 || s.front() == '-') return false;
  for (const char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// `"text"`, built by appending: GCC 12 at -O3 (the Release build) wrongly reports -Wrestrict for
// `"\"" + std::string(text)` (GCC bug 105329), which fails the build with -Werror.
std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  out.append(text);
  out.push_back('"');
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

Expected<TaskUser> parse_task_user(std::string_view text) {
  TaskUser u;
  const auto colon = text.find(':');
  if (colon != std::string_view::npos) {
    u.uid = parse_id(text.substr(0, colon));
    u.gid = parse_id(text.substr(colon + 1));
    if (!u.uid || !u.gid) return error(quoted(text) + " is not uid:gid (two decimal numbers)");
    return u;
  }
  if (auto uid = parse_id(text)) {
    u.uid = uid;
    return u;
  }
  if (!valid_name(text)) return error(quoted(text) + " is not a user name, uid or uid:gid");
  u.name = std::string(text);
  return u;
}

std::map<std::string, std::string> task_user_attributes(const TaskUserRules& rules) {
  return {{kAttrTaskUser, rules.default_user},
          {kAttrUserDenylist, join(rules.denylist)},
          {kAttrAllowRoot, rules.allow_root ? "true" : "false"}};
}

TaskUserRules task_user_rules_from(const std::map<std::string, std::string>& attributes) {
  TaskUserRules rules;
  if (const auto it = attributes.find(kAttrTaskUser); it != attributes.end()) rules.default_user = it->second;
  if (const auto it = attributes.find(kAttrUserDenylist); it != attributes.end()) rules.denylist = split(it->second);
  if (const auto it = attributes.find(kAttrAllowRoot); it != attributes.end()) rules.allow_root = it->second == "true";
  return rules;
}

std::string effective_user(const std::string& task_user, const TaskUserRules& rules) {
  return task_user.empty() ? rules.default_user : task_user;
}

std::optional<std::string> refused_user(const std::string& task_user, const TaskUserRules& rules,
                                        std::optional<std::uint32_t> resolved_uid) {
  const std::string user = effective_user(task_user, rules);
  const auto parsed = parse_task_user(user);
  if (!parsed) return "user " + parsed.error();
  const auto uid = parsed->uid ? parsed->uid : resolved_uid;
  const bool root = parsed->name == "root" || (uid && *uid == 0);
  for (const auto& denied : rules.denylist) {
    const bool hit = denied == parsed->name || (uid && denied == std::to_string(*uid)) || (denied == "root" && root);
    if (hit) return "user \"" + user + "\" is on the node's user_denylist (" + join(rules.denylist) + ")";
  }
  if (root && !rules.allow_root) return "user \"" + user + "\" is root and the node's allow_root rule is off";
  return std::nullopt;
}

}  // namespace mooring::domain
