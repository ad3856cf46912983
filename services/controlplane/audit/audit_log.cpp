#include "services/controlplane/audit/audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::audit {

namespace {
const log::Logger logger{"audit"};
}

std::string to_line(const Entry& e, const std::string& time) {
  nlohmann::json line = {
      {"Time", time},       {"Transport", e.transport}, {"Actor", {{"Type", e.actor_type}, {"ID", e.actor}}},
      {"Remote", e.remote}, {"Method", e.method},       {"Namespace", e.ns},
      {"Object", e.object}, {"Status", e.status}};
  if (!e.path.empty()) line["Path"] = e.path;
  if (!e.via.empty()) line["Via"] = e.via;
  // Invalid UTF-8 in a path becomes U+FFFD rather than an exception.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

domain::Expected<std::unique_ptr<AuditLog>> AuditLog::open(const std::vector<std::filesystem::path>& files) {
  std::vector<Sink> sinks;
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      const std::string why = std::strerror(errno);
      for (auto& s : sinks) ::close(s.fd);
      return domain::error("audit log " + path.string() + ": " + why);
    }
    sinks.push_back(Sink{path, fd, false});
  }
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(sinks)));
}

AuditLog::~AuditLog() {
  for (auto& s : sinks_) ::close(s.fd);
}

void AuditLog::record(const Entry& entry) {
  const std::string line = to_line(entry, domain::format_time(domain::now())) + "\n";
  for (auto& s : sinks_) {
    const auto n = ::write(s.fd, line.data(), line.size());
    const bool ok = n == static_cast<ssize_t>(line.size());
    if (!ok && !s.failing)
      logger.error("cannot append to the audit log", {{"path", s.path.string()}, {"error", std::strerror(errno)}});
    s.failing = !ok;
  }
}

}  // namespace mooring::controlplane::audit
