#include "shared/metrics/process_metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace mooring::metrics {

namespace {

std::optional<std::string> slurp(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double to_double(std::string_view s) {
  double v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace

std::optional<ProcessSample> parse_proc_stat(std::string_view stat, double ticks_per_second, double page_size,
                                             double boot_time) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // after the last ')'. Field 3 (state) is the first one after it.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  std::string_view fields[22];  // fields 3..24
  std::size_t n = 0;
  while (n < 22) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) break;
    const auto end = rest.find_first_of(" \n");
    fields[n++] = rest.substr(0, end);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  if (n < 22) return std::nullopt;
  auto field = [&](int number) { return to_double(fields[number - 3]); };  // proc(5) numbering
  ProcessSample s;
  s.cpu_seconds = (field(14) + field(15)) / ticks_per_second;  // utime + stime
  s.start_time_seconds = boot_time + field(22) / ticks_per_second;
  s.virtual_bytes = field(23);
  s.resident_bytes = field(24) * page_size;
  return s;
}

std::optional<double> parse_boot_time(std::string_view proc_stat) {
  const auto at = proc_stat.find("\nbtime ");
  if (at == std::string_view::npos) return std::nullopt;
  auto rest = proc_stat.substr(at + 7);
  return to_double(rest.substr(0, rest.find('\n')));
}

std::optional<ProcessSample> read_process_sample() {
  auto stat = slurp("/proc/self/stat");
  if (!stat) return std::nullopt;
  // Boot time does not change while we run.
  static const double boot_time = [] {
    auto text = slurp("/proc/stat");
    return text ? parse_boot_time(*text).value_or(0) : 0;
  }();
  auto s = parse_proc_stat(*stat, static_cast<double>(::sysconf(_SC_CLK_TCK)),
                           static_cast<double>(::sysconf(_SC_PAGESIZE)), boot_time);
  if (!s) return std::nullopt;
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  s->open_fds = fds > 0 ? static_cast<double>(fds - 1) : 0;  // less the iterator's own descriptor
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) s->max_fds = static_cast<double>(limit.rlim_cur);
  return s;
}

}  // namespace mooring::metrics
