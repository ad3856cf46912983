#include "services/nodeagent/plugins/registry.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <filesystem>
#include <fstream>
#include <boost/asio/bind_cancellation_slot.hpp>

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::vector<PluginKind> kMonolith{PluginKind::controller, PluginKind::node};

PluginRegistration reg(std::string id, std::string socket, bool launched = true) {
  return PluginRegistration{std::move(id), std::move(socket), "hostpath.mooring.dev", "0.1.0", launched};
}

class RegistryFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mooring-registry-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path file() const { return dir_ / "plugins.json"; }
  fs::path dir_;
};

TEST(PluginRegistry, MonolithRegistersAsControllerAndNode) {
  PluginRegistry r;
  const auto gen = r.register_plugin(kMonolith, reg("hp", "/s/hp.sock"));
  const auto c = r.lookup(PluginKind::controller, "hp");
  const auto n = r.lookup(PluginKind::node, "hp");
  ASSERT_TRUE(c && n);
  EXPECT_EQ(c->generation, gen);
  EXPECT_EQ(n->generation, gen);
  EXPECT_EQ(n->reg.socket_path, "/s/hp.sock");
  EXPECT_EQ(n->reg.provider, "hostpath.mooring.dev");
  EXPECT_EQ(r.list().size(), 2u);
  EXPECT_EQ(r.list(PluginKind::node).size(), 1u);
}

TEST(PluginRegistry, NodeOnlyPluginIsNotAController) {
  PluginRegistry r;
  r.register_plugin({PluginKind::node}, reg("n", "/n.sock"));
  EXPECT_FALSE(r.lookup(PluginKind::controller, "n"));
  EXPECT_TRUE(r.lookup(PluginKind::node, "n"));
}

TEST(PluginRegistry, NewestInstanceWinsAndALateDeregistrationOfTheOldOneIsIgnored) {
  PluginRegistry r;
  const auto old_gen = r.register_plugin({PluginKind::node}, reg("hp", "/old.sock"));
  const auto new_gen = r.register_plugin({PluginKind::node}, reg("hp", "/new.sock"));
  EXPECT_GT(new_gen, old_gen);
  EXPECT_EQ(r.lookup(PluginKind::node, "hp")->reg.socket_path, "/new.sock");
  EXPECT_FALSE(r.deregister(PluginKind::node, "hp", old_gen));
  ASSERT_TRUE(r.lookup(PluginKind::node, "hp"));
  EXPECT_EQ(r.lookup(PluginKind::node, "hp")->reg.socket_path, "/new.sock");
  EXPECT_TRUE(r.deregister(PluginKind::node, "hp", new_gen));
  EXPECT_FALSE(r.lookup(PluginKind::node, "hp"));
  EXPECT_FALSE(r.deregister(PluginKind::node, "hp", new_gen));  // idempotent
}

TEST(PluginRegistry, DeregisterOneKindKeepsTheOther) {
  PluginRegistry r;
  const auto gen = r.register_plugin(kMonolith, reg("hp", "/s"));
  EXPECT_TRUE(r.deregister(PluginKind::controller, "hp", gen));
  EXPECT_FALSE(r.lookup(PluginKind::controller, "hp"));
  EXPECT_TRUE(r.lookup(PluginKind::node, "hp"));
}

TEST_F(RegistryFile, PersistedSoARestartedAgentFindsTheSockets) {
  uint64_t gen = 0;
  {
    PluginRegistry r(file());
    ASSERT_FALSE(r.load());  // missing file = empty
    r.register_plugin({PluginKind::node}, reg("sidecar", "/run/csi/sidecar.sock", /*launched=*/false));
    gen = r.register_plugin(kMonolith, reg("hp", "/data/hp.sock"));
    EXPECT_FALSE(r.last_save_error());
  }
  PluginRegistry restarted(file());
  ASSERT_FALSE(restarted.load());
  const auto side = restarted.lookup(PluginKind::node, "sidecar");
  ASSERT_TRUE(side);
  EXPECT_EQ(side->reg.socket_path, "/run/csi/sidecar.sock");
  EXPECT_FALSE(side->reg.launched);
  EXPECT_EQ(restarted.lookup(PluginKind::controller, "hp")->generation, gen);
  // Generations keep increasing across restarts, so an old instance never matches a new one.
  EXPECT_GT(restarted.register_plugin({PluginKind::node}, reg("x", "/x")), gen);
  EXPECT_TRUE(restarted.deregister(PluginKind::node, "sidecar", side->generation));
  PluginRegistry again(file());
  ASSERT_FALSE(again.load());
  EXPECT_FALSE(again.lookup(PluginKind::node, "sidecar"));
  EXPECT_TRUE(again.lookup(PluginKind::node, "x"));
}

TEST_F(RegistryFile, CorruptFileIsReportedAndTheRegistryStartsEmpty) {
  { std::ofstream(file()) << "{not json"; }
  PluginRegistry r(file());
  EXPECT_TRUE(r.load());
  EXPECT_TRUE(r.list().empty());
}

TEST(PluginRegistry, SubscribersSeeEveryChangeInOrder) {
  asio::io_context io;
  PluginRegistry r;
  auto sub = r.subscribe(io.get_executor());
  std::vector<std::string> seen;
  auto fut = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 3; ++i) {
          const auto e = co_await sub->next();
          seen.push_back(std::string(e.type == RegistryEvent::Type::registered ? "+" : "-") +
                         std::string(to_string(e.instance.kind)) + ":" + e.instance.reg.plugin_id);
        }
      },
      asio::use_future);
  io.poll();  // the consumer now waits
  const auto gen = r.register_plugin(kMonolith, reg("hp", "/s"));
  r.deregister(PluginKind::node, "hp", gen);
  io.run_for(5s);
  ASSERT_EQ(fut.wait_for(0s), std::future_status::ready);
  fut.get();
  EXPECT_EQ(seen, (std::vector<std::string>{"+controller:hp", "+node:hp", "-node:hp"}));
  EXPECT_FALSE(sub->overflowed());
}

TEST(PluginRegistry, WaitingSubscriberIsCancellable) {
  asio::io_context io;
  PluginRegistry r;
  auto sub = r.subscribe(io.get_executor());
  asio::cancellation_signal cancel;
  bool aborted = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await sub->next();
        } catch (const boost::system::system_error& e) {
          aborted = e.code() == asio::error::operation_aborted;
        }
      },
      asio::bind_cancellation_slot(cancel.slot(), asio::detached));
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.run_for(5s);
  EXPECT_TRUE(aborted);
}

TEST(PluginRegistry, DroppedSubscriptionDoesNotBreakPublishing) {
  asio::io_context io;
  PluginRegistry r;
  { auto sub = r.subscribe(io.get_executor()); }
  r.register_plugin({PluginKind::node}, reg("hp", "/s"));
  EXPECT_TRUE(r.lookup(PluginKind::node, "hp"));
}

}  // namespace
}  // namespace mooring::nodeagent
