// The template of a walled task's root (issue 41), private to the process room: a mount namespace
// holding the part of every task's root that does not depend on the task (walls_plan.hpp's base:
// the system directories read-only, the hidden paths masked, /dev), built once per agent process
// by a child that pivots into it, and held by a descriptor. A walled start enters it and copies it
// (setns + unshare(CLONE_NEWNS): its dozen mounts, whatever the node has mounted), then moves in
// detached copies of its own paths (open_tree + move_mount), instead of copying every mount of
// the node and detaching them again. A running task has a copy of its own: it keeps its root when
// the template is remade (its inputs changed) or gone (an agent restart).
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "services/nodeagent/process/walls.hpp"

namespace mooring::nodeagent {

// What a template was made from: the hidden paths, what each of them and each system directory
// was then (a file replaced by a rename since is no longer under the template's mask), and the
// top-level mount points its tasks' binds need.
struct WallsTemplateKey {
  std::vector<std::string> hidden;
  std::vector<std::string> stamps;  // one per hidden path, then one per system directory
  std::set<std::string> tops;
};

struct WallsTemplate {
  UniqueFd ns;  // the template's mount namespace (/proc/<builder>/ns/mnt)
  WallsTemplateKey key;
};

// No template on this kernel: moving a detached copy of a host path into the template's copy
// needs open_tree and move_mount (Linux 5.2; Debian 12's 6.1 has them). The start then copies
// the host's mounts and detaches them, as before the template.
struct NoTemplate {};

// The template for `w`: the one made before when its inputs are unchanged and it has every
// top-level mount point `w` needs, else a new one (w.root is where the builder mounts it before
// it pivots). Thread-safe; the caller's reference keeps it open through its start.
std::variant<std::shared_ptr<const WallsTemplate>, NoTemplate, WallError> walls_template(const Walls& w);

}  // namespace mooring::nodeagent
