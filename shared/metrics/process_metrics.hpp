// Metrics room: the standard process_* figures (the names every Prometheus client library uses),
// read from /proc/self on each scrape. Parsing is separate from reading so it is tested on text.
#pragma once

#include <optional>
#include <string_view>

namespace mooring::metrics {

struct ProcessSample {
  double cpu_seconds = 0;         // process_cpu_seconds_total: user + system
  double resident_bytes = 0;      // process_resident_memory_bytes
  double virtual_bytes = 0;       // process_virtual_memory_bytes
  double start_time_seconds = 0;  // process_start_time_seconds: since the Unix epoch
  double open_fds = 0;            // process_open_fds
  double max_fds = 0;             // process_max_fds: the soft RLIMIT_NOFILE
};

// Fills cpu, memory and start time from the text of /proc/<pid>/stat. `boot_time`: btime of
// /proc/stat (seconds since the epoch). Nothing when the text is not a stat line.
std::optional<ProcessSample> parse_proc_stat(std::string_view stat, double ticks_per_second, double page_size,
                                             double boot_time);
// btime of the text of /proc/stat; nothing when missing.
std::optional<double> parse_boot_time(std::string_view proc_stat);

// This process, now. Nothing when /proc is not readable.
std::optional<ProcessSample> read_process_sample();

}  // namespace mooring::metrics
