#include "plugins/hostpath/call_log.hpp"

#include "shared/csi/error_table.hpp"
#include "shared/tls/digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

namespace mooring::hostpath {
namespace {

std::string iso_now(std::int64_t& unix_ms) {
  const auto now = std::chrono::system_clock::now();
  unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

}  // namespace

std::string secrets_digest(const StringMap& secrets) {
  if (secrets.empty()) return {};
  std::string canonical;
  for (const auto& [k, v] : secrets) canonical += k + "=" + v + "\n";
  return tls::sha256_hex(canonical);
}

CallLog::CallLog(std::filesystem::path file) : file_(std::move(file)) {
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

CallLog::~CallLog() {
  if (fd_ >= 0) ::close(fd_);
}

void CallLog::append(const CallRecord& r) {
  if (fd_ < 0) return;
  std::int64_t unix_ms = 0;
  const std::string time = iso_now(unix_ms);
  nlohmann::json j = {{"time", time},
                      {"unix_ms", unix_ms},
                      {"pid", static_cast<std::int64_t>(::getpid())},
                      {"rpc", r.rpc},
                      {"volume_id", r.volume_id},
                      {"node_id", r.node_id},
                      {"path", r.path},
                      {"code", r.code},
                      {"code_name", csi::code_name(static_cast<grpc::StatusCode>(r.code))},
                      {"message", r.message},
                      {"duration_ms", r.duration_ms},
                      {"fault", r.fault},
                      {"parameters", r.detail.parameters},
                      {"volume_context", r.detail.volume_context},
                      {"publish_context", r.detail.publish_context},
                      {"secrets_sha256", r.detail.secrets_sha256},
                      {"content_source", r.detail.content_source}};
  if (r.held_ms > 0) j["held_ms"] = r.held_ms;
  if (r.end_mono_ns > 0) {
    j["start_mono_ns"] = r.start_mono_ns;
    j["end_mono_ns"] = r.end_mono_ns;
  }
  // Replace invalid UTF-8 instead of throwing: the log must never take the plugin down.
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard guard(mu_);
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace mooring::hostpath
