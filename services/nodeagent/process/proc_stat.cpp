#include "services/nodeagent/process/proc_stat.hpp"

#include <sstream>
#include <vector>

#include "shared/durable/durable_file.hpp"

namespace mooring::nodeagent {

std::optional<ProcStat> proc_stat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  // read(2) through durable::read_file, not a filebuf: libstdc++'s filebuf throws when a read
  // fails, which it does (ESRCH) for a process that exits while its file is read.
  std::error_code ec;
  const auto read = durable::read_file("/proc/" + std::to_string(pid) + "/stat", ec);
  if (!read) return std::nullopt;
  const std::string& text = *read;
  // The command name (field 2) may contain spaces and parentheses: fields start after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields_in(text.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3
  for (std::string f; fields_in >> f;) fields.push_back(std::move(f));
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  ProcStat out;
  out.state = fields[0][0];
  try {
    out.session = static_cast<pid_t>(std::stol(fields[6 - 3]));
    out.start_ticks = std::stoull(fields[22 - 3]);
  } catch (...) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  const auto st = proc_stat(pid);
  if (!st || st->state == 'Z') return std::nullopt;
  return st->start_ticks;
}

bool environ_has(pid_t pid, const std::string& entry) {
  std::error_code ec;
  const auto read = durable::read_file("/proc/" + std::to_string(pid) + "/environ", ec);
  if (!read) return false;
  std::istringstream in(*read);
  for (std::string kv; std::getline(in, kv, '\0');)
    if (kv == entry) return true;
  return false;
}

}  // namespace mooring::nodeagent
