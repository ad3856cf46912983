// Domain: who a task runs as and whether a node lets it. Pure rules, shared by the control
// plane's placement (with the rules a node reports as attributes) and the agent (with its own
// configuration, checked again once the name is resolved to a uid), so a refused user is
// refused at submit or placement with the node rule named, never silently at start.
#pragma once

#include "shared/domain/result.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::domain {

// Task.User as written: a user name, "uid" or "uid:gid".
struct TaskUser {
  std::string name;  // empty when given as numbers
  std::optional<std::uint32_t> uid;
  std::optional<std::uint32_t> gid;
};
Expected<TaskUser> parse_task_user(std::string_view text);

// A node's rules (the agent's task_user, user_denylist and allow_root settings).
struct TaskUserRules {
  std::string default_user = "nobody";
  std::vector<std::string> denylist{"root"};  // user names or uids
  bool allow_root = false;                    // like Nomad's raw_exec: off unless an operator says so
  bool operator==(const TaskUserRules&) const = default;
};

// The node attributes the rules travel in (registration → node status, placement).
inline constexpr const char* kAttrTaskUser = "task.user";
inline constexpr const char* kAttrUserDenylist = "task.user_denylist";
inline constexpr const char* kAttrAllowRoot = "task.allow_root";
std::map<std::string, std::string> task_user_attributes(const TaskUserRules& rules);
// A node that reports no rules (an older agent) gets the defaults: refusing is the safe side.
TaskUserRules task_user_rules_from(const std::map<std::string, std::string>& attributes);

// The user a task runs as on a node: Task.User, or the node's default.
std::string effective_user(const std::string& task_user, const TaskUserRules& rules);

// Why the node refuses `task_user` (Task.User, empty = the default), naming the node rule; nullopt
// when it may run. `resolved_uid`: the uid the agent resolved the name to, so a second name for
// uid 0 is root too.
std::optional<std::string> refused_user(const std::string& task_user, const TaskUserRules& rules,
                                        std::optional<std::uint32_t> resolved_uid = std::nullopt);

}  // namespace mooring::domain
