#include "services/nodeagent/process/task_init_image.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

// The init's bytes, from the build (MOORING_TASK_INIT_PATH; ccache does not cache a file with
// .incbin, so a changed init is always embedded again).
asm(".section .rodata\n"
    ".balign 16\n"
    ".hidden mooring_task_init_begin\n"
    ".global mooring_task_init_begin\n"
    "mooring_task_init_begin:\n"
    ".incbin \"" MOORING_TASK_INIT_PATH
    "\"\n"
    ".hidden mooring_task_init_end\n"
    ".global mooring_task_init_end\n"
    "mooring_task_init_end:\n"
    ".previous\n");
extern "C" const char mooring_task_init_begin[];
extern "C" const char mooring_task_init_end[];

namespace mooring::nodeagent {
namespace {

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U  // Linux 6.3: an executable memfd, said so (else the kernel warns)
#endif

int make_image() {
  int fd = ::memfd_create(kTaskInitName, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = ::memfd_create(kTaskInitName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  const char* p = mooring_task_init_begin;
  while (p < mooring_task_init_end) {
    const auto n = ::write(fd, p, static_cast<std::size_t>(mooring_task_init_end - p));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return -1;
    }
    p += n;
  }
  // Sealed: nothing, not even the agent, can change what every walled task runs as its init.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

int task_init_image() {
  static const int fd = make_image();
  static const int error = fd < 0 ? errno : 0;
  if (fd < 0) errno = error;
  return fd;
}

}  // namespace mooring::nodeagent
