// The alloc runner with real task processes, the real CSI hook and state store, and fakes for the
// control plane and the volume manager: statuses, events, environment, stop with SIGTERM then
// SIGKILL, Prerun failure, stop during a claim wait, and re-adopting a task after a restart.
#include "services/nodeagent/allocrunner/alloc_runner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <fstream>
#include <thread>

#include "services/nodeagent/allocrunner/csi_hook.hpp"
#include "services/nodeagent/allocrunner/csi_plugin_hook.hpp"
#include "services/nodeagent/allocrunner/task_process.hpp"
#include "services/nodeagent/process/proc_stat.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/async/task_group.hpp"
#include "tests/nodeagent/support/fake_controlplane_calls.hpp"
#include "tests/nodeagent/support/fake_plugin_task_supervision.hpp"
#include "tests/nodeagent/support/fake_volume_mounter.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/descriptors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using domain::ClientStatus;

struct RecordingSink final : AllocStatusSink {
  std::vector<ClientStatus> statuses;  // distinct consecutive statuses
  std::vector<domain::TaskEvent> events;
  void report(const std::string&, ClientStatus s, std::vector<domain::TaskEvent> evs) override {
    if (statuses.empty() || statuses.back() != s) statuses.push_back(s);
    for (auto& e : evs) events.push_back(std::move(e));
  }
  bool has_event(const std::string& type) const {
    for (const auto& e : events)
      if (e.type == type) return true;
    return false;
  }
  std::string message_of(const std::string& type) const {
    for (const auto& e : events)
      if (e.type == type) return e.message;
    return {};
  }
};

class AllocRunnerTest : public ::testing::Test {
 protected:
  AllocRunnerTest() : store(dir / "allocs") {}

  domain::Allocation make_alloc(const std::string& id, std::optional<domain::Task> task) {
    domain::Allocation a;
    a.id = id;
    a.name = "job";
    a.node_id = "n1";
    domain::VolumeRequest r;
    r.name = "my-data";
    r.source = "vol1";
    r.access_mode = domain::AccessMode::single_node_writer;
    r.attachment_mode = domain::AttachmentMode::file_system;
    a.volumes["my-data"] = r;
    a.task = std::move(task);
    return a;
  }

  std::unique_ptr<AllocRunner> make_runner(AllocState state) {
    auto runner = std::make_unique<AllocRunner>(
        io.get_executor(), std::move(state), store, sink,
        AllocRunnerOptions{.default_kill_timeout = 5s, .node_id = node_id, .node_name = node_name});
    AllocRunner* r = runner.get();
    CsiHookOptions o;
    o.node_id = "n1";
    o.claim_backoff = async::Backoff{5ms, 20ms, 2.0, 0.0, 60s};
    r->add_hook(std::make_unique<CsiHook>(
        r->state().alloc, cp, mounter, o, [r](std::string t, std::string m) { r->emit(std::move(t), std::move(m)); },
        r->state().claimed_volumes, [r](const std::string& v) { return r->note_claim(v); }));
    return runner;
  }

  std::unique_ptr<AllocRunner> make_runner(const domain::Allocation& a) {
    AllocState s;
    s.alloc = a;
    return make_runner(std::move(s));
  }

  // Runs the runner in `group` until its task has written `ready` and it reports running.
  bool run_until_task_ready(AllocRunner& runner, async::TaskGroup& group, const std::filesystem::path& ready) {
    group.spawn("run", [&runner]() { return runner.run(); });
    return test::wait_until(
        [&] {
          run_for(io, 20ms);
          return std::filesystem::exists(ready) && runner.client_status() == ClientStatus::running;
        },
        20s);
  }

  static domain::Task shell(const std::string& script, domain::Duration kill_timeout = domain::Duration{0}) {
    domain::Task t;
    t.command = "/bin/sh";
    t.args = {"-c", script};
    t.kill_timeout = kill_timeout;
    return t;
  }

  test::TempDir dir{"alloc-runner"};
  std::string node_id, node_name;  // AllocRunnerOptions of make_runner
  asio::io_context io;
  AllocStateStore store;
  RecordingSink sink;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
};

// The allocation's directory (state, task output) is the agent's alone: 0700 whatever the umask,
// created with its parents on the first save and found in place on the next.
TEST_F(AllocRunnerTest, StateDirectoryIsPrivateAndSavedStateReadsBack) {
  const mode_t old_umask = ::umask(0);
  AllocState s;
  s.alloc = make_alloc("alloc-perm", shell("true"));
  const auto saved = store.save(s);
  ::umask(old_umask);
  ASSERT_TRUE(saved) << saved.error();
  const auto dir = store.dir() / "alloc-perm";
  EXPECT_EQ(std::filesystem::status(dir).permissions(), std::filesystem::perms::owner_all);
  s.stop_reason = "second save";
  ASSERT_TRUE(store.save(s));
  const auto all = store.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].stop_reason, "second save");
}

// The runners' writes go through the store's writer thread: in submission order per allocation,
// the newest state wins, a removal queued after the saves removes, and durable() returns only
// once everything submitted before it is on disk.
TEST_F(AllocRunnerTest, SubmittedStatesAreWrittenInOrderAndDurableWaitsForThem) {
  AllocState a, b;
  a.alloc = make_alloc("alloc-a", shell("true"));
  b.alloc = make_alloc("alloc-b", shell("true"));
  for (int i = 0; i < 50; ++i) {
    a.stop_reason = "step " + std::to_string(i);
    store.submit(a);
    b.task_result = "step " + std::to_string(i);
    store.submit(b);
  }
  store.submit_remove("alloc-b");
  bool durable = false;
  std::vector<AllocState> seen;
  run_async(io, [&]() -> asio::awaitable<void> {
    co_await store.durable();
    durable = true;
    seen = store.load_all();
  });
  ASSERT_TRUE(durable);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].alloc.id, "alloc-a");
  EXPECT_EQ(seen[0].stop_reason, "step 49");
  EXPECT_FALSE(std::filesystem::exists(store.dir() / "alloc-b")) << "the removal came after every save";

  // A save queued behind a removal that has not started replaces it: the newest intent wins.
  store.submit_remove("alloc-a");
  a.stop_reason = "kept";
  store.submit(a);
  store.wait_durable();
  const auto after = store.load_all();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].stop_reason, "kept");

  // Another file's writes ride the same thread: durable() covers them, in order, and a newer
  // content of the same key replaces one that has not started.
  std::vector<std::string> written;
  for (int i = 0; i < 20; ++i) store.submit_write("reports", [&written, i] { written.push_back(std::to_string(i)); });
  store.wait_durable();
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back(), "19");
  EXPECT_TRUE(std::is_sorted(written.begin(), written.end(),
                             [](const std::string& l, const std::string& r) { return std::stoi(l) < std::stoi(r); }));
}

// Write-ahead through the writer thread: when the claim reaches the control plane, the state on
// disk already names the volume, so a crash right after the claim still releases it.
TEST_F(AllocRunnerTest, AClaimIsOnDiskBeforeItIsSent) {
  std::vector<std::string> on_disk_at_claim;
  auto answer = cp.mount_info_for;
  cp.mount_info_for = [&](const ::mooring::v1::ClaimVolumeRequest& r) {
    for (const auto& state : store.load_all())
      if (state.alloc.id == r.alloc_id()) on_disk_at_claim = state.claimed_volumes;
    return answer(r);
  };
  auto runner = make_runner(make_alloc("a1", shell("true")));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  ASSERT_EQ(cp.claims.size(), 1u);
  EXPECT_EQ(on_disk_at_claim, std::vector<std::string>{"vol1"});
}

TEST_F(AllocRunnerTest, TaskSeesVolumePathAndAllocIdAndCompletes) {
  const auto out = dir / "env.txt";
  auto runner =
      make_runner(make_alloc("a1", shell("echo \"$MOORING_VOLUME_MY_DATA $MOORING_ALLOC_ID\" > " + out.string())));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(test::read_file(out), "/fake/a1/vol1 a1\n");
  EXPECT_EQ(sink.statuses, (std::vector{ClientStatus::pending, ClientStatus::running, ClientStatus::complete}));
  EXPECT_TRUE(sink.has_event("Received"));
  EXPECT_TRUE(sink.has_event("Started"));
  EXPECT_TRUE(runner->finished());
  EXPECT_TRUE(runner->state().postrun_done);
  ASSERT_EQ(mounter.releases.size(), 1u) << "Postrun hands the volume to the release";
  // The state on disk says the same.
  store.wait_durable();
  auto saved = store.load_all();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].client_status, ClientStatus::complete);
  EXPECT_TRUE(saved[0].postrun_done);
  EXPECT_EQ(saved[0].claimed_volumes, std::vector<std::string>{"vol1"});
}

// The task's environment, as the kernel holds it for the real process: Task.Env, Task.SecretEnv,
// the MOORING_* variables and a minimal PATH/HOME, nothing of the agent's own environment.
TEST_F(AllocRunnerTest, TaskEnvironmentIsEnvSecretEnvMooringVariablesAndPathHomeOnly) {
  ::setenv("MOORING_TEST_AGENT_CREDENTIAL", "agent-only-5d2", 1);
  const auto out = dir / "environ";
  auto task = shell("tr '\\0' '\\n' < /proc/$$/environ > " + out.string());
  task.env = {{"MODE", "blue"}};
  task.secret_env = {{"DB_PASSWORD", "runner-secret-2b7"}};
  auto runner = make_runner(make_alloc("a1", task));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  ::unsetenv("MOORING_TEST_AGENT_CREDENTIAL");
  ASSERT_EQ(runner->client_status(), ClientStatus::complete) << sink.message_of("Terminated");
  std::map<std::string, std::string> env;
  for (const auto& line : test::read_lines(out)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"DB_PASSWORD", "runner-secret-2b7"},
                                                     {"HOME", kTaskHome},
                                                     {"MODE", "blue"},
                                                     {"MOORING_ALLOC_ID", "a1"},
                                                     {"MOORING_ALLOC_NAME", "job"},
                                                     {kLaunchIdEnv, runner->state().launch_id},
                                                     {"MOORING_VOLUME_MY_DATA", "/fake/a1/vol1"},
                                                     {"PATH", kTaskPath}}));
  // Never on the agent's disk, never in an event.
  store.wait_durable();
  for (const auto& entry : std::filesystem::recursive_directory_iterator(store.dir())) {
    if (entry.path().filename() == "environ" || !entry.is_regular_file()) continue;
    EXPECT_EQ(test::read_file(entry.path()).find("runner-secret-2b7"), std::string::npos) << entry.path();
  }
  for (const auto& e : sink.events) EXPECT_EQ(e.message.find("runner-secret-2b7"), std::string::npos) << e.type;
}

TEST(TaskInterpolation, NodeAndAllocVariablesAreFilledAndOthersLeftAsWritten) {
  const std::map<std::string, std::string> vars{{"node.id", "n1"}, {"node.name", "worker-1"}, {"alloc.index", "2"}};
  EXPECT_EQ(interpolate("csi-${node.name}", vars), "csi-worker-1");
  EXPECT_EQ(interpolate("${node.id}/${alloc.index}/${node.id}", vars), "n1/2/n1");
  EXPECT_EQ(interpolate("${env.HOME} ${node.id", vars), "${env.HOME} ${node.id");
  EXPECT_EQ(interpolate("plain", vars), "plain");
  EXPECT_EQ(interpolate("", vars), "");
}

// One system allocation, one identity per node: Args and Env values see the node they run on.
TEST_F(AllocRunnerTest, ArgsAndEnvAreInterpolatedWithTheNodeAndTheNodeIsInTheEnvironment) {
  node_id = "n7";
  node_name = "worker-7";
  const auto out = dir / "seen";
  auto task = shell("echo \"$1 $WHO $MOORING_NODE_ID $MOORING_NODE_NAME\" > " + out.string());
  task.args.push_back("sh");  // $0
  task.args.push_back("csi-${node.name}");
  task.env = {{"WHO", "${alloc.name}@${node.id}"}};
  auto runner = make_runner(make_alloc("a1", task));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  ASSERT_EQ(runner->client_status(), ClientStatus::complete) << sink.message_of("Terminated");
  EXPECT_EQ(test::read_lines(out), std::vector<std::string>{"csi-worker-7 job@n7 n7 worker-7"});
}

// A state read back after a restart has no SecretEnv values: the task waits for the control
// plane's copy of the allocation (the watch) and then starts with them.
TEST_F(AllocRunnerTest, ARestoredAllocationStartsItsTaskOnlyOnceTheSecretEnvCameBack) {
  const auto out = dir / "token";
  auto task = shell("echo \"$TOKEN\" > " + out.string());
  task.secret_env = {{"TOKEN", "restored-secret-8e4"}};
  AllocState before;
  before.alloc = make_alloc("a1", task);
  ASSERT_TRUE(store.save(before));
  auto loaded = store.load_all();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded[0].secret_env_pending);
  EXPECT_TRUE(loaded[0].alloc.task->secret_env.empty());

  auto runner = make_runner(std::move(loaded[0]));
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return sink.has_event("WaitingForSecrets");
      },
      10s));
  run_for(io, 100ms);
  EXPECT_FALSE(sink.has_event("Started"));
  EXPECT_FALSE(std::filesystem::exists(out));
  runner->update(before.alloc);  // the watch's answer
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_EQ(test::read_file(out), "restored-secret-8e4\n");
}

TEST_F(AllocRunnerTest, NonZeroExitFailsTheAllocation) {
  auto runner = make_runner(make_alloc("a1", shell("exit 3")));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_NE(sink.message_of("Terminated").find("exited with code 3"), std::string::npos)
      << sink.message_of("Terminated");
  EXPECT_EQ(mounter.releases.size(), 1u);
}

TEST_F(AllocRunnerTest, CommandThatCannotStartFailsAndStillReleases) {
  domain::Task t;
  t.command = (dir / "no-such-binary").string();
  auto runner = make_runner(make_alloc("a1", t));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_TRUE(sink.has_event("DriverFailure"));
  EXPECT_EQ(mounter.releases.size(), 1u);
}

TEST_F(AllocRunnerTest, StopSendsSigtermThenSigkillAfterKillTimeout) {
  const auto ready = dir / "ready";
  // Ignores SIGTERM: only SIGKILL ends it.
  auto runner = make_runner(
      make_alloc("a1", shell("trap '' TERM; touch " + ready.string() + "; while true; do sleep 0.1; done", 300ms)));
  async::TaskGroup group(io.get_executor(), "test");
  ASSERT_TRUE(run_until_task_ready(*runner, group, ready));
  const auto t0 = std::chrono::steady_clock::now();
  runner->stop("test stop");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_TRUE(sink.has_event("Killing"));
  EXPECT_NE(sink.message_of("Killed").find("SIGKILL"), std::string::npos) << sink.message_of("Killed");
  EXPECT_EQ(mounter.releases.size(), 1u);
}

// stop() signals the task itself, in the caller's turn: the task hears of a stop without waiting
// for the runner's coroutine to be resumed through a busy executor (issue 21: 7-22 ms under load).
// The SIGKILL grace still counts from that SIGTERM, and the task is told once.
TEST_F(AllocRunnerTest, StopSendsSigtermBeforeTheExecutorRunsAgain) {
  const auto ready = dir / "ready", terms = dir / "terms";
  auto runner = make_runner(make_alloc("a1", shell("trap 'echo term >> " + terms.string() + "; exit 0' TERM; touch " +
                                                   ready.string() + "; while true; do sleep 0.05; done")));
  async::TaskGroup group(io.get_executor(), "test");
  ASSERT_TRUE(run_until_task_ready(*runner, group, ready));
  runner->stop("test stop");
  EXPECT_TRUE(sink.has_event("Killing"));
  // The io_context does not run here: only a signal sent by stop() itself can make the trap write.
  EXPECT_TRUE(test::wait_until([&] { return std::filesystem::exists(terms); }, 10s))
      << "SIGTERM waited for the executor";
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_EQ(test::read_file(terms), "term\n") << "the task was sent SIGTERM more than once";
  int killing = 0;
  for (const auto& e : sink.events) killing += e.type == "Killing";
  EXPECT_EQ(killing, 1);
  EXPECT_EQ(mounter.releases.size(), 1u);
}

// ---- plugin tasks (Task.CSIPlugin): the CSI plugin hook ----

class PluginTaskTest : public AllocRunnerTest {
 protected:
  // `restored`: edits the state as an earlier agent left it.
  std::unique_ptr<AllocRunner> make_plugin_runner(const std::string& id, const std::string& script,
                                                  domain::Duration kill_timeout = domain::Duration{0},
                                                  const std::function<void(AllocState&)>& restored = {}) {
    auto task = shell(script, kill_timeout);
    task.csi_plugin = domain::TaskCSIPlugin{.id = "hostpath"};
    auto a = make_alloc(id, task);
    a.volumes.clear();
    AllocState st;
    st.alloc = a;
    if (restored) restored(st);
    auto runner = std::make_unique<AllocRunner>(io.get_executor(), std::move(st), store, sink,
                                                AllocRunnerOptions{.default_kill_timeout = 5s});
    AllocRunner* r = runner.get();
    r->add_hook(
        std::make_unique<CsiPluginHook>(r->state().alloc, store.dir() / id, dir / "ps", plugins,
                                        [r](std::string t, std::string m) { r->emit(std::move(t), std::move(m)); }));
    return runner;
  }
  FakePluginTaskSupervision plugins;
};

// Prerun gives the task its socket in <alloc dir>/csi (a private directory) as CSI_ENDPOINT;
// Poststart hands the running task to the supervision with that socket; the stop tells it.
TEST_F(PluginTaskTest, ThePluginTaskGetsCsiEndpointInItsAllocDirAndIsSupervisedUntilItStops) {
  const auto out = dir / "endpoint";
  auto runner = make_plugin_runner("p1", "echo \"$CSI_ENDPOINT\" > " + out.string() + "; exec sleep 60", 1s);
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return sink.has_event("PluginHealthy") && std::filesystem::exists(out) && !test::read_file(out).empty();
      },
      20s));
  const auto socket = store.dir() / "p1" / "csi" / "csi.sock";
  EXPECT_EQ(test::read_file(out), "unix://" + socket.string() + "\n");
  EXPECT_EQ(std::filesystem::status(socket.parent_path()).permissions(), std::filesystem::perms::owner_all);
  ASSERT_EQ(plugins.supervised.size(), 1u);
  EXPECT_EQ(plugins.supervised[0], "p1 hostpath " + socket.string());
  EXPECT_EQ(runner->client_status(), ClientStatus::running);
  EXPECT_TRUE(plugins.stopped_allocs.empty());
  runner->stop("test stop");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_EQ(plugins.stopped_allocs, std::vector<std::string>{"p1"});
}

// A plugin that does not become healthy fails its allocation: the event says why, the task is
// stopped (SIGTERM), and the supervision is told it stopped.
TEST_F(PluginTaskTest, APluginThatDoesNotBecomeHealthyFailsTheAllocationAndItsTaskIsStopped) {
  plugins.answer = domain::error("plugin did not become healthy within 2s: plugin socket /x/csi.sock did not appear");
  plugins.delay = 100ms;
  auto runner = make_plugin_runner("p2", "exec sleep 60", 1s);
  run_async(
      io, [&]() -> asio::awaitable<void> { co_await runner->run(); }, 20s);
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_NE(sink.message_of("SetupFailure").find("plugin did not become healthy within 2s"), std::string::npos)
      << sink.message_of("SetupFailure");
  EXPECT_TRUE(sink.has_event("Killed"));
  EXPECT_NE(sink.message_of("Terminated").find("did not become healthy"), std::string::npos)
      << sink.message_of("Terminated");
  EXPECT_EQ(plugins.stopped_allocs, std::vector<std::string>{"p2"});
}

// A plugin task that exits while it is still being probed is just its exit, not a hung wait.
TEST_F(PluginTaskTest, APluginTaskThatExitsWhileBeingProbedEndsWithItsExit) {
  plugins.delay = 30s;
  auto runner = make_plugin_runner("p3", "exit 4");
  run_async(
      io, [&]() -> asio::awaitable<void> { co_await runner->run(); }, 20s);
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_NE(sink.message_of("Terminated").find("exited with code 4"), std::string::npos)
      << sink.message_of("Terminated");
  EXPECT_EQ(plugins.stopped_allocs, std::vector<std::string>{"p3"});
}

// A plugin task that ended while the agent was down is never supervised again, but the
// supervision still hears that it stopped (it retires the instance an earlier run registered).
TEST_F(PluginTaskTest, APluginTaskThatEndedWhileTheAgentWasDownIsReportedStopped) {
  auto runner = make_plugin_runner("p4", "exec sleep 60", domain::Duration{0}, [](AllocState& s) {
    s.client_status = ClientStatus::running;
    s.task_started = true;
    s.task = TaskHandle{::getpid(), 1};  // a start time that cannot match: the task is gone
  });
  run_async(
      io, [&]() -> asio::awaitable<void> { co_await runner->run(); }, 20s);
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_TRUE(plugins.supervised.empty());
  EXPECT_EQ(plugins.stopped_allocs, std::vector<std::string>{"p4"});
}

// The socket stays under sun_path's 107 bytes: a deep allocation directory moves it to the
// agent's short directory; a MountDir that leaves the allocation's directory is refused.
TEST(PluginSocketPath, ADeepAllocDirMovesTheSocketToTheShortRootAndMountDirStaysInside) {
  const std::string id = "0123456789abcdef0123456789abcdef0123";
  auto in_alloc = plugin_socket_path("/var/lib/mooring/agent/allocs/" + id, "csi", "/var/lib/mooring/agent/ps", id);
  ASSERT_TRUE(in_alloc) << in_alloc.error();
  EXPECT_EQ(in_alloc->string(), "/var/lib/mooring/agent/allocs/" + id + "/csi/csi.sock");
  const std::string deep(70, 'd');
  auto moved = plugin_socket_path("/" + deep + "/allocs/" + id, "csi", "/srv/ps", id);
  ASSERT_TRUE(moved) << moved.error();
  EXPECT_EQ(moved->string(), "/srv/ps/" + id + "/csi.sock");
  EXPECT_FALSE(plugin_socket_path("/" + deep + "/allocs/" + id, "csi", "/" + deep + "/ps", id));
  EXPECT_LE(moved->string().size(), kMaxSocketPath);
  EXPECT_LE(kMaxSocketPath, 107u);  // sun_path
  EXPECT_FALSE(plugin_socket_path("/a/" + id, "../other", "/srv/ps", id));
  EXPECT_FALSE(plugin_socket_path("/a/" + id, "/etc", "/srv/ps", id));
  auto nested = plugin_socket_path("/a/" + id, "plugins/hp", "/srv/ps", id);
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->string(), "/a/" + id + "/plugins/hp/csi.sock");
}

TEST_F(AllocRunnerTest, WithoutTaskHoldsVolumesUntilStopped) {
  auto runner = make_runner(make_alloc("a1", std::nullopt));
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->client_status() == ClientStatus::running;
      },
      10s));
  run_for(io, 100ms);
  EXPECT_FALSE(runner->finished());
  EXPECT_TRUE(mounter.releases.empty());
  domain::Allocation stopped = runner->state().alloc;
  stopped.desired_status = domain::DesiredStatus::stop;
  runner->update(stopped);
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      10s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_EQ(mounter.releases.size(), 1u);
}

// Every status the agent reports comes back from the control plane as a modified allocation
// (new events, indexes, client status). Those echoes are not worth a durable write; a change of
// what the agent acts on is.
TEST_F(AllocRunnerTest, EchoedUpdatesWriteNothingAndSpecChangesAreWritten) {
  auto runner = make_runner(make_alloc("a1", std::nullopt));
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->client_status() == ClientStatus::running;
      },
      10s));
  auto state_file = *store.alloc_dir("a1") / "state.json";
  auto content = [&] {  // an echo written would carry its new index
    std::error_code ec;
    store.wait_durable();
    return durable::read_durable(state_file, ec).value_or("");
  };
  const auto before = content();
  ASSERT_FALSE(before.empty());
  domain::Allocation echo = runner->state().alloc;
  echo.client_status = ClientStatus::running;
  echo.events.push_back({domain::now(), "Started", "task started"});
  echo.modify_index += 7;
  runner->update(echo);
  EXPECT_EQ(content(), before) << "an echo rewrote the state file";
  EXPECT_EQ(runner->state().alloc.modify_index, echo.modify_index);  // memory still follows
  domain::Allocation changed = echo;
  changed.stop_after_client_disconnect = std::chrono::seconds(30);
  runner->update(changed);
  EXPECT_NE(content(), before) << "a spec change was not written";
  runner->update([&] {
    auto stopped = changed;
    stopped.desired_status = domain::DesiredStatus::stop;
    return stopped;
  }());
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      10s));
}

TEST_F(AllocRunnerTest, FinalClaimErrorFailsAllocationAndPostrunRuns) {
  cp.claim_answers = {grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "access mode not allowed")};
  auto runner = make_runner(make_alloc("a1", shell("true")));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_FALSE(sink.has_event("Started"));
  EXPECT_NE(sink.message_of("SetupFailure").find("access mode not allowed"), std::string::npos);
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_TRUE(runner->state().postrun_done);
}

// The stop reaches the control plane while the claim is in flight, and the claim is refused
// because of it: the allocation was stopped, not failed (seen in the real binaries' e2e test).
TEST_F(AllocRunnerTest, AClaimRefusedBecauseTheStopWonTheRaceEndsComplete) {
  std::unique_ptr<AllocRunner> runner;
  cp.claim_answers = {
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the allocation is stopping and takes no new claims")};
  cp.during_claim = [&] { runner->stop("stopped by the control plane"); };
  runner = make_runner(make_alloc("a1", shell("true")));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_FALSE(sink.has_event("Started"));
  EXPECT_EQ(std::count(sink.statuses.begin(), sink.statuses.end(), ClientStatus::failed), 0);
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_TRUE(runner->state().postrun_done);
}

TEST_F(AllocRunnerTest, StopDuringClaimWaitEndsAtOnceAndReleases) {
  for (int i = 0; i < 10000; ++i)
    cp.claim_answers.push_back(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "volume max claims reached"));
  auto runner = make_runner(make_alloc("a1", shell("true")));
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return cp.claims.size() >= 2;
      },
      10s));
  EXPECT_EQ(runner->client_status(), ClientStatus::pending);
  runner->stop("test stop");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      5s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_FALSE(sink.has_event("Started"));
  ASSERT_EQ(mounter.releases.size(), 1u);
}

TEST_F(AllocRunnerTest, RestartReadoptsARunningTaskWithoutClaimingAgain) {
  const auto ready = dir / "ready";
  pid_t pid = 0;
  {
    auto runner = make_runner(make_alloc("a1", shell("touch " + ready.string() + "; while true; do sleep 0.1; done")));
    async::TaskGroup group(io.get_executor(), "agent-1");
    group.spawn("run", [&]() { return runner->run(); });
    // The task may write its file before the runner has taken the start's answer from the writer
    // thread: wait for both.
    ASSERT_TRUE(test::wait_until(
        [&] {
          run_for(io, 20ms);
          return std::filesystem::exists(ready) && runner->state().task.has_value();
        },
        20s));
    pid = runner->state().task->pid;
    // Agent shutdown: the runner is cancelled, the task keeps running.
    runner->shutdown();
    group.cancel();
    run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
  }
  ASSERT_EQ(::kill(pid, 0), 0) << "the task outlives the runner";
  EXPECT_EQ(cp.claims.size(), 1u);

  // The restarted agent: the volume is still mounted.
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/fake/a1/vol1", .mounted = true}};
  store.wait_durable();  // what the runner queued before the "crash"
  auto states = store.load_all();
  ASSERT_EQ(states.size(), 1u);
  ASSERT_TRUE(states[0].task);
  EXPECT_EQ(states[0].task->pid, pid);
  auto runner = make_runner(states[0]);
  async::TaskGroup group(io.get_executor(), "agent-2");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return sink.has_event("Reattached");
      },
      10s));
  EXPECT_EQ(cp.claims.size(), 1u) << "no new claim for a volume still mounted";
  runner->stop("test stop");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  // The test process is still the task's parent (the "old agent"), so it reaps the zombie here.
  int wstatus = 0;
  EXPECT_EQ(::waitpid(pid, &wstatus, WNOHANG), pid) << "the re-adopted task was stopped";
  EXPECT_EQ(mounter.releases.size(), 1u);
}

TEST_F(AllocRunnerTest, TaskThatEndedWhileAgentWasDownIsReportedNotRestarted) {
  AllocState s;
  s.alloc = make_alloc("a1", shell("touch " + (dir / "ran").string()));
  s.client_status = ClientStatus::running;
  s.task_started = true;
  s.claimed_volumes = {"vol1"};
  // A pid with a start time that cannot match: the task is gone.
  s.task = TaskHandle{::getpid(), 1};
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/fake/a1/vol1", .mounted = true}};
  auto runner = make_runner(s);
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_FALSE(std::filesystem::exists(dir / "ran")) << "a task is never started twice";
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_NE(sink.message_of("Terminated").find("unknown"), std::string::npos) << sink.message_of("Terminated");
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_EQ(mounter.releases[0].second, std::vector<std::string>{"vol1"});
}

// Launch ids are found system-wide in /proc: unique per test process, so that runs side by side
// never find each other's tasks.
std::string unique_launch(const std::string& name) { return name + "-" + std::to_string(::getpid()); }

// A task started by an earlier agent, as that agent left it: running in its own session with the
// allocation's launch id in its environment. The test process stays its parent and reaps it.
TaskHandle start_earlier_task(asio::io_context& io, const std::string& launch_id, const std::string& script) {
  TaskSpec spec;
  spec.command = "/bin/sh";
  spec.args = {"-c", script};
  spec.env[kLaunchIdEnv] = launch_id;
  auto task = TaskProcess::start(io.get_executor(), spec);
  EXPECT_TRUE(task) << task.error();
  return task ? (*task)->handle() : TaskHandle{};
}

bool reaped(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    int wstatus = 0;
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Killed between the spawn and the pid's write: the state holds the launch's intent only. The
// restarted runner finds the running task by its launch id and re-adopts it: one copy, never two.
TEST_F(AllocRunnerTest, RestartBetweenSpawnAndPidRecordReadoptsTheTaskByItsLaunchId) {
  const auto marker = dir / "starts";
  const std::string script = "echo x >> " + marker.string() + "; while true; do sleep 0.1; done";
  const auto earlier = start_earlier_task(io, unique_launch("launch-1"), script);
  ASSERT_GT(earlier.pid, 0);
  ASSERT_TRUE(test::wait_until([&] { return std::filesystem::exists(marker); }, 10s));

  AllocState s;
  s.alloc = make_alloc("a1", shell(script));
  s.claimed_volumes = {"vol1"};
  s.launch_id = unique_launch("launch-1");
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/fake/a1/vol1", .mounted = true}};
  auto runner = make_runner(s);
  async::TaskGroup group(io.get_executor(), "agent-2");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->client_status() == ClientStatus::running;
      },
      10s));
  EXPECT_TRUE(sink.has_event("Reattached")) << "found by its launch id";
  EXPECT_FALSE(sink.has_event("Started")) << "never started a second time";
  ASSERT_TRUE(runner->state().task);
  EXPECT_EQ(runner->state().task->pid, earlier.pid);
  runner->stop("test stop");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_TRUE(reaped(earlier.pid)) << "the re-adopted task was stopped";
  EXPECT_EQ(test::read_file(marker), "x\n") << "the task ran exactly once";
}

// The same crash window, but the task is gone (or never ran): the start is declared failed and
// nothing is started.
TEST_F(AllocRunnerTest, RestartWithALaunchIntentAndNoProcessFailsWithoutStarting) {
  AllocState s;
  s.alloc = make_alloc("a1", shell("touch " + (dir / "ran").string()));
  s.claimed_volumes = {"vol1"};
  s.launch_id = unique_launch("launch-that-left-no-process");
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/fake/a1/vol1", .mounted = true}};
  auto runner = make_runner(s);
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_FALSE(std::filesystem::exists(dir / "ran")) << "a task is never started twice";
  EXPECT_EQ(runner->client_status(), ClientStatus::failed);
  EXPECT_NE(sink.message_of("DriverFailure").find("not started a second time"), std::string::npos);
  ASSERT_EQ(mounter.releases.size(), 1u);
}

// A stop that arrives while the restarted runner is still setting its volumes up again (here: the
// claim keeps being refused) reaches the re-adopted task before the allocation is reported
// finished and its volumes released.
TEST_F(AllocRunnerTest, StopDuringSetupAfterARestartKillsTheReadoptedTask) {
  const auto earlier = start_earlier_task(io, unique_launch("launch-2"), "while true; do sleep 0.1; done");
  ASSERT_GT(earlier.pid, 0);
  for (int i = 0; i < 10000; ++i)
    cp.claim_answers.push_back(grpc::Status(grpc::StatusCode::UNAVAILABLE, "control plane restarting"));
  AllocState s;
  s.alloc = make_alloc("a1", shell("while true; do sleep 0.1; done"));
  s.client_status = ClientStatus::running;
  s.task_started = true;
  s.launch_id = unique_launch("launch-2");
  s.task = earlier;
  s.claimed_volumes = {"vol1"};
  // The volume is not mounted any more (a plugin whose NodeStage leaves no mount): set up again.
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol1", .path = "/fake/a1/vol1", .mounted = false}};
  auto runner = make_runner(s);
  async::TaskGroup group(io.get_executor(), "agent-2");
  group.spawn("run", [&]() { return runner->run(); });
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return cp.claims.size() >= 2;
      },
      10s));
  runner->stop("stopped right after the agent restart");
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(io, 20ms);
        return runner->finished();
      },
      20s));
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_TRUE(sink.has_event("Killed"));
  EXPECT_TRUE(reaped(earlier.pid)) << "the recorded task does not outlive its allocation";
  ASSERT_EQ(mounter.releases.size(), 1u);
}

// A stop recorded before the agent went down: the restarted runner stops the task it finds
// instead of reporting "stopped before the task started" over a running process.
TEST_F(AllocRunnerTest, StopRecordedBeforeARestartKillsTheRecordedTask) {
  const auto earlier = start_earlier_task(io, unique_launch("launch-3"), "while true; do sleep 0.1; done");
  ASSERT_GT(earlier.pid, 0);
  AllocState s;
  s.alloc = make_alloc("a1", shell("while true; do sleep 0.1; done"));
  s.client_status = ClientStatus::running;
  s.task_started = true;
  s.task = earlier;
  s.claimed_volumes = {"vol1"};
  s.stop_reason = "stopped by the control plane";
  auto runner = make_runner(s);
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  EXPECT_EQ(runner->client_status(), ClientStatus::complete);
  EXPECT_TRUE(sink.has_event("Killed"));
  EXPECT_TRUE(reaped(earlier.pid));
  EXPECT_EQ(cp.claims.size(), 0u) << "nothing is set up again for a stopped allocation";
}

// The launch id is in the task's environment and in the state written before the spawn.
TEST_F(AllocRunnerTest, TheLaunchIdIsOnDiskBeforeTheTaskStartsAndInItsEnvironment) {
  const auto out = dir / "env";
  auto runner = make_runner(make_alloc("a1", shell("echo $" + std::string(kLaunchIdEnv) + " > " + out.string())));
  run_async(io, [&]() -> asio::awaitable<void> { co_await runner->run(); });
  ASSERT_EQ(runner->client_status(), ClientStatus::complete);
  const auto launch = runner->state().launch_id;
  ASSERT_FALSE(launch.empty());
  EXPECT_EQ(test::read_file(out), launch + "\n");
  store.wait_durable();
  auto states = store.load_all();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].launch_id, launch);
}

TEST(TaskProcessTest, FindLaunchFindsTheSessionLeaderAndItsChildren) {
  asio::io_context io;
  TaskSpec spec;
  spec.command = "/bin/sh";
  spec.args = {"-c", "sleep 30 & sleep 30; wait"};
  spec.env[kLaunchIdEnv] = unique_launch("find-me");
  auto task = TaskProcess::start(io.get_executor(), spec);
  ASSERT_TRUE(task) << task.error();
  LaunchProcesses found;
  ASSERT_TRUE(test::wait_until(
      [&] {
        found = find_launch(unique_launch("find-me"));
        return found.others.size() >= 2;
      },
      10s));
  ASSERT_TRUE(found.leader);
  EXPECT_EQ(*found.leader, (*task)->handle());
  EXPECT_FALSE(find_launch("someone-else").leader);
  (*task)->signal(SIGKILL);
  run_async(io, [&]() -> asio::awaitable<void> { (void)co_await (*task)->wait(); });
}

// The task's stdout and stderr are the log files (open across the exec), and nothing else the
// agent holds leaks into it, even a descriptor without close-on-exec: read from the kernel while
// the task runs, it holds exactly /dev/null and its two log files.
TEST(TaskProcessTest, OutputGoesToTheLogFilesAndTheTaskHoldsNothingElse) {
  test::TempDir dir;
  const int leaked = ::open("/dev/zero", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 3);
  TaskSpec spec;
  spec.command = "sh";  // a bare name: found in the task's PATH
  spec.args = {"-c", "echo to-stdout; echo to-stderr >&2; exec sleep 30"};
  spec.stdout_path = dir.path() / "stdout.log";
  spec.stderr_path = dir.path() / "stderr.log";
  asio::io_context io;
  auto task = TaskProcess::start(io.get_executor(), spec);
  ::close(leaked);
  ASSERT_TRUE(task) << task.error();
  const pid_t pid = (*task)->handle().pid;
  std::map<int, std::string> fds;
  const std::map<int, std::string> want{
      {0, "/dev/null"}, {1, spec.stdout_path.string()}, {2, spec.stderr_path.string()}};
  EXPECT_TRUE(test::wait_until(
      [&] {
        fds = test::open_descriptors(pid);
        return fds == want;
      },
      10s))
      << test::describe_descriptors(fds);
  EXPECT_TRUE(test::wait_until([&] { return test::read_file(spec.stderr_path) == "to-stderr\n"; }, 10s));
  EXPECT_EQ(test::read_file(spec.stdout_path), "to-stdout\n");
  (*task)->signal(SIGKILL);
  run_async(io, [&]() -> asio::awaitable<void> { (void)co_await (*task)->wait(); });
}

// A log file that cannot be opened is named, and nothing starts.
TEST(TaskProcessTest, AnUnopenableLogFileIsNamedAndNothingStarts) {
  test::TempDir dir;
  TaskSpec spec;
  spec.command = "/bin/true";
  spec.stdout_path = dir.path() / "missing-dir" / "stdout.log";
  asio::io_context io;
  auto task = TaskProcess::start(io.get_executor(), spec);
  ASSERT_FALSE(task);
  EXPECT_NE(task.error().find("cannot open " + spec.stdout_path.string()), std::string::npos) << task.error();
}

TEST(TaskProcessTest, AdoptRefusesAReusedPid) {
  EXPECT_EQ(TaskProcess::adopt(asio::io_context().get_executor(), TaskHandle{::getpid(), 1}), nullptr);
  const auto ticks = process_start_ticks(::getpid());
  ASSERT_TRUE(ticks);
  asio::io_context io;
  EXPECT_NE(TaskProcess::adopt(io.get_executor(), TaskHandle{::getpid(), *ticks}), nullptr);
}

// /proc/<pid>/environ of a running process as a map.
std::map<std::string, std::string> environ_of(pid_t pid) {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// Nothing of the agent's own environment reaches a task: it sees the spec's variables and a
// minimal PATH and HOME, read from the kernel's copy of the real process's environment.
TEST(TaskProcessTest, TaskStartsWithACleanEnvironment) {
  ::setenv("MOORING_TEST_AGENT_ONLY", "agent-credential", 1);
  TaskSpec spec;
  spec.command = "sleep";  // a bare name: looked up in the task's PATH
  spec.args = {"30"};
  spec.env = {{"APP_MODE", "prod"}, {kLaunchIdEnv, unique_launch("clean-env")}};
  asio::io_context io;
  auto task = TaskProcess::start(io.get_executor(), spec);
  ::unsetenv("MOORING_TEST_AGENT_ONLY");
  ASSERT_TRUE(task) << task.error();
  std::map<std::string, std::string> env;
  ASSERT_TRUE(test::wait_until(
      [&] {
        env = environ_of((*task)->handle().pid);
        return env.contains("APP_MODE");
      },
      10s));
  EXPECT_EQ(
      env,
      (std::map<std::string, std::string>{
          {"APP_MODE", "prod"}, {"HOME", kTaskHome}, {"PATH", kTaskPath}, {kLaunchIdEnv, unique_launch("clean-env")}}));
  (*task)->signal(SIGKILL);
  run_async(io, [&]() -> asio::awaitable<void> { (void)co_await (*task)->wait(); });
}

// PATH and HOME are defaults: a task's own PATH wins, and a bare command is looked up there.
TEST(TaskProcessTest, TheTasksOwnPathIsUsedToFindItsCommand) {
  test::TempDir dir;
  const auto tool = dir.path() / "my-tool";
  {
    std::ofstream f(tool);
    f << "#!/bin/sh\necho \"$PATH $HOME\" > " << (dir.path() / "out").string() << "\n";
  }
  ::chmod(tool.c_str(), 0755);
  EXPECT_FALSE(resolve_command("my-tool", kTaskPath));
  TaskSpec spec;
  spec.command = "my-tool";
  spec.env = {{"PATH", dir.path().string() + ":/bin"}, {"HOME", "/home/app"}};
  asio::io_context io;
  auto task = TaskProcess::start(io.get_executor(), spec);
  ASSERT_TRUE(task) << task.error();
  run_async(io, [&]() -> asio::awaitable<void> { (void)co_await (*task)->wait(); });
  EXPECT_EQ(test::read_file(dir.path() / "out"), dir.path().string() + ":/bin /home/app\n");
}

}  // namespace
}  // namespace mooring::nodeagent
