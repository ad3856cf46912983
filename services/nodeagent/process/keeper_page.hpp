// The agent's side of a walled task's keeper page (issue 43, task_init_protocol.hpp): a one-page
// memfd the task's init reads its deadline from. The agent writes it while it is heard by the
// control plane; a restarted agent opens the same page again through the init's descriptor 4.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "services/nodeagent/process/spawn.hpp"

namespace mooring::nodeagent {

// When the init stops its task: SIGTERM at term_at, SIGKILL at kill_at (steady_clock is
// CLOCK_MONOTONIC, the clock the init reads).
struct KeeperDeadline {
  std::chrono::steady_clock::time_point term_at;
  std::chrono::steady_clock::time_point kill_at;
  bool operator==(const KeeperDeadline&) const = default;
};

class KeeperPage {
 public:
  KeeperPage() = default;
  ~KeeperPage();
  KeeperPage(KeeperPage&& other) noexcept;
  KeeperPage& operator=(KeeperPage&& other) noexcept;

  // A new page with no deadline (close-on-exec; walls.cpp gives the init its copy); empty and
  // errno set when it cannot be made.
  static KeeperPage create();
  // The page of a running walled task's init, through /proc/<init>/fd/4; empty when there is
  // none (an init started before keeper pages, or one that is gone).
  static KeeperPage of_init(pid_t init);

  explicit operator bool() const { return page_ != nullptr; }
  int fd() const { return fd_.fd; }

  void set(const KeeperDeadline& deadline);
  // What the page holds now; nullopt for no deadline (or no page).
  std::optional<KeeperDeadline> get() const;

 private:
  KeeperPage(UniqueFd fd, void* page) : fd_(std::move(fd)), page_(page) {}
  void unmap();

  UniqueFd fd_;
  void* page_ = nullptr;
};

}  // namespace mooring::nodeagent
