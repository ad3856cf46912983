// LimitsWatch: a RESOURCE_EXHAUSTED answer asks the named plugin's supervisor (or every one's,
// for a claim that does not say whose) for its limits now, and wakes it; a supervisor that is
// gone is simply skipped.
#include "services/nodeagent/plugins/limits_watch.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "shared/async/wake_signal.hpp"

namespace mooring::nodeagent {
namespace {

TEST(LimitsWatch, AnExhaustedPluginsWatcherIsAskedAndWoken) {
  boost::asio::io_context io;
  LimitsWatch watch;
  auto wake_a = std::make_shared<async::WakeSignal>(io.get_executor());
  auto a = std::make_shared<LimitsWatch::Watcher>(LimitsWatch::Watcher{false, wake_a});
  auto b = std::make_shared<LimitsWatch::Watcher>();
  watch.watch("hostpath", a);
  watch.watch("other", b);
  const auto before = wake_a->generation();
  watch.exhausted("hostpath");
  EXPECT_TRUE(a->wanted);
  EXPECT_FALSE(b->wanted);
  EXPECT_NE(wake_a->generation(), before);
  a->wanted = false;
  watch.exhausted({});  // a claim's answer: every plugin
  EXPECT_TRUE(a->wanted);
  EXPECT_TRUE(b->wanted);
}

TEST(LimitsWatch, AWatcherThatIsGoneIsSkipped) {
  LimitsWatch watch;
  auto a = std::make_shared<LimitsWatch::Watcher>();
  watch.watch("hostpath", a);
  a.reset();
  watch.exhausted("hostpath");  // nothing to ask, nothing to crash on
  auto again = std::make_shared<LimitsWatch::Watcher>();
  watch.watch("hostpath", again);  // a restarted supervisor watches again
  watch.exhausted("hostpath");
  EXPECT_TRUE(again->wanted);
}

}  // namespace
}  // namespace mooring::nodeagent
