// The process_* figures: parsing /proc/<pid>/stat (a command name with spaces and parentheses
// included) and reading this process.
#include <gtest/gtest.h>

#include "shared/metrics/process_metrics.hpp"

namespace mooring::metrics {
namespace {

TEST(ProcessMetrics, ParsesStatFieldsAfterTheCommandName) {
  // Fields 14/15 utime/stime, 22 starttime (ticks), 23 vsize (bytes), 24 rss (pages).
  const std::string stat =
      "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  auto s = parse_proc_stat(stat, 100, 4096, 1'700'000'000);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1'700'000'010.0);
  EXPECT_DOUBLE_EQ(s->virtual_bytes, 123456789.0);
  EXPECT_DOUBLE_EQ(s->resident_bytes, 300.0 * 4096);
}

TEST(ProcessMetrics, RefusesTextThatIsNotAStatLine) {
  EXPECT_FALSE(parse_proc_stat("", 100, 4096, 0));
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2", 100, 4096, 0));
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\n"));
  EXPECT_EQ(parse_boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n"), 1700000000.0);
}

TEST(ProcessMetrics, ReadsThisProcess) {
  auto s = read_process_sample();
  ASSERT_TRUE(s);
  EXPECT_GT(s->resident_bytes, 0);
  EXPECT_GT(s->open_fds, 2);  // stdin, stdout, stderr at least
  EXPECT_GE(s->max_fds, s->open_fds);
  EXPECT_GT(s->start_time_seconds, 1'600'000'000);
}

}  // namespace
}  // namespace mooring::metrics
