#include "services/nodeagent/process/keeper_page.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <utility>

#include "services/nodeagent/process/task_init_protocol.hpp"

namespace mooring::nodeagent {
namespace {

using task_init::kKeeperPageSize;
using Clock = std::chrono::steady_clock;

constexpr const char* kMemfdName = "mooring-keeper";

long long to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void* map(int fd) {
  void* at = ::mmap(nullptr, kKeeperPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return at == MAP_FAILED ? nullptr : at;
}

// Only a page this agent made: the init's descriptor 4 is a memfd of that name and a page long.
bool is_keeper_memfd(pid_t init, int fd) {
  char link[128];
  const std::string path = "/proc/" + std::to_string(init) + "/fd/" + std::to_string(task_init::kKeeperFd);
  const auto n = ::readlink(path.c_str(), link, sizeof link - 1);
  if (n <= 0) return false;
  const std::string target(link, static_cast<std::size_t>(n));
  struct stat st {};
  return target.starts_with(std::string("/memfd:") + kMemfdName) && ::fstat(fd, &st) == 0 &&
         st.st_size == static_cast<off_t>(kKeeperPageSize);
}

}  // namespace

KeeperPage::~KeeperPage() { unmap(); }

KeeperPage::KeeperPage(KeeperPage&& other) noexcept
    : fd_(std::move(other.fd_)), page_(std::exchange(other.page_, nullptr)) {}

KeeperPage& KeeperPage::operator=(KeeperPage&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    page_ = std::exchange(other.page_, nullptr);
  }
  return *this;
}

void KeeperPage::unmap() {
  if (page_) ::munmap(page_, kKeeperPageSize);
  page_ = nullptr;
}

KeeperPage KeeperPage::create() {
  UniqueFd fd{::memfd_create(kMemfdName, MFD_CLOEXEC)};
  if (fd.fd < 0 || ::ftruncate(fd.fd, static_cast<off_t>(kKeeperPageSize)) != 0) return {};
  void* page = map(fd.fd);
  if (!page) return {};
  return KeeperPage(std::move(fd), page);
}

KeeperPage KeeperPage::of_init(pid_t init) {
  const std::string path = "/proc/" + std::to_string(init) + "/fd/" + std::to_string(task_init::kKeeperFd);
  UniqueFd fd{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  if (fd.fd < 0 || !is_keeper_memfd(init, fd.fd)) return {};
  void* page = map(fd.fd);
  if (!page) return {};
  return KeeperPage(std::move(fd), page);
}

void KeeperPage::set(const KeeperDeadline& d) {
  if (!page_) return;
  auto* p = static_cast<task_init::KeeperPageLayout*>(page_);
  // kill_at first: an init that reads the new term_at reads its kill_at too.
  std::atomic_ref<long long>(p->kill_at_ns).store(to_ns(d.kill_at));
  std::atomic_ref<long long>(p->term_at_ns).store(to_ns(d.term_at));
}

std::optional<KeeperDeadline> KeeperPage::get() const {
  if (!page_) return std::nullopt;
  auto* p = static_cast<task_init::KeeperPageLayout*>(page_);
  const long long term = std::atomic_ref<long long>(p->term_at_ns).load();
  const long long kill = std::atomic_ref<long long>(p->kill_at_ns).load();
  if (kill == 0) return std::nullopt;
  return KeeperDeadline{Clock::time_point(std::chrono::nanoseconds(term)),
                        Clock::time_point(std::chrono::nanoseconds(kill))};
}

}  // namespace mooring::nodeagent
