// mooring-hostpath's pure pieces, without a process or socket: flag parsing, fault rules and
// their counting, pagination tokens, the state file codec.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/fault_injector.hpp"
#include "plugins/hostpath/node_state.hpp"
#include "plugins/hostpath/options.hpp"
#include "plugins/hostpath/volume_store.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/durable/journal.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::hostpath {
namespace {

TEST(HostpathOptions, ParsesFlagsAndFallsBackToEnvironment) {
  const auto r = parse_options({"--node-id", "n1", "--mode=node", "--topology", "zone=a", "--topology", "rack=r1",
                                "--max-volumes", "4", "--known-nodes", "a,b", "--capacity", "2Gi", "--stage-without-mount"},
                               {{"CSI_ENDPOINT", "unix:///tmp/x.sock"}, {"MOORING_FAULT_FILE", "/tmp/f.json"}}, "host");
  ASSERT_EQ(r.outcome, ParseResult::Outcome::run) << r.message;
  EXPECT_EQ(r.options.socket_path, "/tmp/x.sock");
  EXPECT_EQ(r.options.node_id, "n1");
  EXPECT_EQ(r.options.mode, Mode::node);
  EXPECT_EQ(r.options.topology.at("rack"), "r1");
  EXPECT_EQ(r.options.max_volumes, 4);
  EXPECT_EQ(r.options.known_nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.options.capacity_bytes, 2LL << 30);
  EXPECT_EQ(r.options.fault_file, "/tmp/f.json");
  EXPECT_TRUE(r.options.stage_without_mount);
  EXPECT_FALSE(parse_options({}, {{"CSI_ENDPOINT", "unix:///tmp/x.sock"}}, "h").options.stage_without_mount);
  // The vendor version GetPluginInfo reports: the build's unless set (an upgrade test sets it).
  EXPECT_EQ(parse_options({}, {{"CSI_ENDPOINT", "unix:///tmp/x.sock"}}, "h").options.vendor_version, MOORING_VERSION);
  EXPECT_EQ(parse_options({"--vendor-version", "2.0.0"}, {{"CSI_ENDPOINT", "unix:///tmp/x.sock"}}, "h").options.vendor_version,
            "2.0.0");
}

TEST(HostpathOptions, RejectsBadInputWithAMessage) {
  EXPECT_EQ(parse_options({}, {}, "h").outcome, ParseResult::Outcome::exit_error);  // no endpoint
  EXPECT_EQ(parse_options({"--endpoint", "tcp://x"}, {}, "h").outcome, ParseResult::Outcome::exit_error);
  EXPECT_EQ(parse_options({"--endpoint", "unix:///s", "--node-id", "../etc"}, {}, "h").outcome,
            ParseResult::Outcome::exit_error);
  EXPECT_EQ(parse_options({"--endpoint", "unix:///s", "--topology", "novalue"}, {}, "h").outcome,
            ParseResult::Outcome::exit_error);
  EXPECT_EQ(parse_options({"--endpoint", "unix:///s", "--vendor-version="}, {}, "h").outcome,
            ParseResult::Outcome::exit_error);
  EXPECT_EQ(parse_options({"--help"}, {}, "h").outcome, ParseResult::Outcome::exit_ok);
  std::int64_t n = 0;
  EXPECT_TRUE(parse_size("512Mi", n));
  EXPECT_EQ(n, 512LL << 20);
  EXPECT_TRUE(parse_size("3G", n));
  EXPECT_EQ(n, 3000000000LL);
  EXPECT_FALSE(parse_size("-1", n));
  EXPECT_FALSE(parse_size("12Qi", n));
}

TEST(HostpathFaultRules, RejectUnknownKeysAndMeaninglessRules) {
  std::vector<FaultRule> rules;
  std::string error;
  EXPECT_TRUE(parse_fault_rules(R"({"rules":[{"rpc":"Probe","hang":true},{"rpc":"*","delay_ms":5}]})", rules, error));
  EXPECT_EQ(rules.size(), 2u);
  EXPECT_TRUE(parse_fault_rules("", rules, error));
  EXPECT_TRUE(rules.empty());
  EXPECT_FALSE(parse_fault_rules(R"([{"rpc":"Probe","cde":14}])", rules, error));
  EXPECT_NE(error.find("cde"), std::string::npos);
  EXPECT_FALSE(parse_fault_rules(R"([{"rpc":"Probe"}])", rules, error));
  EXPECT_FALSE(parse_fault_rules(R"([{"rpc":"Probe","code":99}])", rules, error));
  EXPECT_FALSE(parse_fault_rules(R"([{"rpc":"Probe","code":14,"exit":true}])", rules, error));
  EXPECT_TRUE(parse_fault_rules(R"([{"rpc":"NodeGetVolumeStats","abnormal":"disk gone"}])", rules, error)) << error;
  EXPECT_EQ(rules.at(0).abnormal, "disk gone");
}

TEST(HostpathFaultInjector, CountsUsesDelaysAndResumesAfterRestart) {
  test::TempDir dir("hp-logic");
  test::write_file(dir / "f.json",
                   R"([{"rpc":"A","delay_ms":50},{"rpc":"A","code":14,"count":2},{"rpc":"B","exit":true,"count":1}])");
  {
    FaultInjector f(dir / "f.json", dir / "progress.json");
    auto d = f.decide("A", "");
    EXPECT_EQ(d.action, FaultDecision::Action::fail);
    EXPECT_EQ(d.delay.count(), 50);
    EXPECT_EQ(d.describe(), "delay+fail");
    EXPECT_EQ(f.decide("A", "").action, FaultDecision::Action::fail);
    d = f.decide("A", "");
    EXPECT_EQ(d.action, FaultDecision::Action::none);
    EXPECT_EQ(d.describe(), "delay");
    EXPECT_EQ(f.decide("B", "").action, FaultDecision::Action::exit);
    EXPECT_EQ(f.decide("C", "").action, FaultDecision::Action::none);
  }
  FaultInjector again(dir / "f.json", dir / "progress.json");  // a restarted plugin
  EXPECT_EQ(again.decide("B", "").action, FaultDecision::Action::none);
  EXPECT_EQ(again.decide("A", "").action, FaultDecision::Action::none);
  // Rewriting the file re-arms every rule.
  test::write_file(dir / "f.json", R"([{"rpc":"B","exit":true,"count":1}])");
  EXPECT_EQ(again.decide("B", "").action, FaultDecision::Action::exit);
}

TEST(HostpathPagination, TokensAreOpaqueAndValidated) {
  std::string after;
  EXPECT_TRUE(parse_page_token(make_page_token("vol-1"), after));
  EXPECT_EQ(after, "vol-1");
  EXPECT_FALSE(parse_page_token("invalid-token", after));
  EXPECT_FALSE(parse_page_token("after:../x", after));
}

TEST(HostpathStateCodec, RoundTripsVolumesSnapshotsAndPublications) {
  StoreState s;
  VolumeRecord v;
  v.id = "vol-1";
  v.name = "n";
  v.capacity_bytes = 42;
  v.path = "/d/volumes/vol-1";
  v.topology = {{{"zone", "a"}}};
  v.publications = {{"node-a", true, 2}};
  s.volumes[v.id] = v;
  s.snapshots["snap-1"] = {"snap-1", "s", "vol-1", 42, "/d/snapshots/snap-1", 7};
  StoreState back;
  std::string error;
  ASSERT_TRUE(decode_state(encode_state(s), back, error)) << error;
  EXPECT_EQ(encode_state(back), encode_state(s));
  EXPECT_EQ(back.volumes.at("vol-1").publications.at(0).node_id, "node-a");
  EXPECT_FALSE(decode_state("{\"version\":99}", back, error));
}

}  // namespace
}  // namespace mooring::hostpath

namespace mooring::hostpath {
namespace {

// The whole catalogue as the store sees it now.
StoreState read_all(VolumeStore& store) {
  StoreState out;
  EXPECT_TRUE(store.read([&](const StoreState& state) {
                     out = state;
                     return grpc::Status::OK;
                   }).ok());
  return out;
}

// What the store has written: the checkpoint's generation and the journal's size.
std::pair<std::uint64_t, std::uintmax_t> written(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto journal = std::filesystem::file_size(dir / "controller-journal", ec);
  return {durable::generation_of(dir / "controller-state.json"), ec ? 0 : journal};
}

VolumeRecord volume(const std::string& id) {
  VolumeRecord v;
  v.id = id;
  v.name = id;
  v.path = "/x/" + id;
  return v;
}

// One transaction that puts volume(id).
grpc::Status put_volume(VolumeStore& store, const std::string& id) {
  return store.transact([&](StoreTxn& txn) {
    txn.put_volume(volume(id));
    return grpc::Status::OK;
  });
}

// Two plugin processes share one data dir (nodes sharing a storage backend). Each caches the
// state it last read or wrote; a change by the other (a journal record, or a new checkpoint)
// must be seen.
TEST(HostpathVolumeStore, CachedStateFollowsWritesOfAnotherStoreOnTheSameDir) {
  test::TempDir dir;
  VolumeStore a(dir.path()), b(dir.path());
  ASSERT_EQ(a.prepare(), "");
  ASSERT_TRUE(put_volume(a, "v1").ok());
  StoreState seen;
  seen = read_all(b);
  EXPECT_EQ(seen.volumes.size(), 1u);
  ASSERT_TRUE(put_volume(b, "v2").ok());
  ASSERT_TRUE(put_volume(a, "v3").ok());  // a's cache is stale: it must reload, not overwrite v2
  seen = read_all(b);
  EXPECT_EQ(seen.volumes.size(), 3u);
  // A failing transaction changes nothing, in the file or in the cache.
  EXPECT_FALSE(a.transact([](StoreTxn& txn) {
                  txn.erase_volume("v1");
                  txn.edit_volume("v2")->capacity_bytes = 7;
                  return grpc::Status(grpc::StatusCode::INTERNAL, "boom");
                }).ok());
  seen = read_all(a);
  EXPECT_EQ(seen.volumes.size(), 3u);
  EXPECT_EQ(seen.volumes.at("v2").capacity_bytes, 0);
  // Neither does one that fails after changing records in place: the cache is the file again.
  const auto before = written(dir.path());
  EXPECT_EQ(a.transact([](StoreTxn& txn) {
              txn.edit_volume("v3")->capacity_bytes = 9;
              return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such node");
            }).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(read_all(a).volumes.at("v3").capacity_bytes, 0);
  EXPECT_EQ(written(dir.path()), before);
  // A transaction that only reads writes nothing.
  ASSERT_TRUE(a.transact([](StoreTxn& txn) {
                 return txn.state().volumes.contains("v1") ? grpc::Status::OK : grpc::Status::CANCELLED;
               }).ok());
  EXPECT_EQ(written(dir.path()), before);
  // A checkpoint written by one is read by the other, with the records appended after it.
  ASSERT_TRUE(b.compact().ok());
  ASSERT_TRUE(b.transact([](StoreTxn& txn) {
                 txn.erase_volume("v1");
                 return grpc::Status::OK;
               }).ok());
  seen = read_all(a);
  EXPECT_EQ(seen.volumes.size(), 2u);
  EXPECT_FALSE(seen.volumes.contains("v1"));
}

// A transaction re-encodes only the records it changed; the checkpoint must still be exactly the
// full encoding of the new state (changed, added and removed records alike).
TEST(HostpathVolumeStore, FileAfterSmallChangesIsTheFullEncodingOfTheState) {
  test::TempDir dir;
  VolumeStore store(dir.path());
  ASSERT_EQ(store.prepare(), "");
  ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                for (int i = 0; i < 50; ++i) {
                  VolumeRecord v;
                  v.id = "v" + std::to_string(i);
                  v.name = v.id;
                  v.path = "/x/" + v.id;
                  txn.put_volume(v);
                }
                txn.put_snapshot({"s1", "s", "v1", 1, "/x/s1", 1});
                return grpc::Status::OK;
              }).ok());
  ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                txn.edit_volume("v7")->publications.push_back({"node-a", false, 1});
                txn.erase_volume("v9");
                txn.erase_snapshot("s1");
                VolumeRecord v;
                v.id = "v99";
                v.name = "v99";
                v.path = "/x/v99";
                txn.put_volume(v);
                return grpc::Status::OK;
              }).ok());
  // A fresh store reads the changes from the journal ...
  VolumeStore fresh(dir.path());
  const auto from_journal = encode_state(read_all(fresh));
  ASSERT_TRUE(store.compact().ok());
  std::error_code ec;
  auto text = durable::read_durable(dir.path() / "controller-state.json", ec);
  ASSERT_TRUE(text);
  StoreState decoded;
  std::string error;
  ASSERT_TRUE(decode_state(*text, decoded, error)) << error;
  EXPECT_EQ(*text, encode_state(decoded));
  EXPECT_EQ(decoded.volumes.size(), 50u);
  EXPECT_FALSE(decoded.volumes.contains("v9"));
  EXPECT_TRUE(decoded.snapshots.empty());
  EXPECT_EQ(decoded.volumes.at("v7").publications.size(), 1u);
  // A fresh store (a restarted plugin) reads the same state.
  VolumeStore restarted(dir.path());
  StoreState seen;
  seen = read_all(restarted);
  EXPECT_EQ(encode_state(seen), *text);
  EXPECT_EQ(from_journal, *text);  // ... and it is the same state
}

// The bytes written per change do not grow with the catalogue: a publish among 2000 volumes
// appends one record of about one volume's size, and compaction keeps the journal no bigger than
// the checkpoint (plus one record), so the checkpoint is rewritten once per its size in changes.
TEST(HostpathVolumeStore, WorkPerChangeDoesNotGrowWithTheCatalogue) {
  test::TempDir dir;
  VolumeStore store(dir.path());
  ASSERT_EQ(store.prepare(), "");
  ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                for (int i = 0; i < 2000; ++i) txn.put_volume(volume("v" + std::to_string(i)));
                return grpc::Status::OK;
              }).ok());
  ASSERT_TRUE(store.compact().ok());
  const auto checkpoint_generation = written(dir.path()).first;
  const auto checkpoint_bytes = std::filesystem::file_size(dir.path() / "controller-state.json.0") +
                                std::filesystem::file_size(dir.path() / "controller-state.json.1");
  const auto journal_before = written(dir.path()).second;
  ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                txn.edit_volume("v1234")->publications.push_back({"node-a", false, 1});
                return grpc::Status::OK;
              }).ok());
  const auto record = written(dir.path()).second - journal_before;
  EXPECT_GT(record, 0u);
  EXPECT_LT(record, 512u);
  EXPECT_EQ(written(dir.path()).first, checkpoint_generation);  // no checkpoint written
  // Many small changes: the journal is compacted and stays bounded.
  std::uintmax_t largest = 0;
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(store.transact([i](StoreTxn& txn) {
                  txn.edit_volume("v" + std::to_string(i % 2000))->capacity_bytes = i;
                  return grpc::Status::OK;
                }).ok());
    largest = std::max(largest, written(dir.path()).second);
  }
  EXPECT_GT(written(dir.path()).first, checkpoint_generation);
  EXPECT_LT(largest, checkpoint_bytes / 2 + 1024);  // one slot's size, plus a record and the header
  VolumeStore restarted(dir.path());
  const auto seen = read_all(restarted);
  EXPECT_EQ(seen.volumes.size(), 2000u);
  EXPECT_EQ(seen.volumes.at("v999").capacity_bytes, 2999);
  EXPECT_EQ(seen.volumes.at("v1234").publications.size(), 1u);
}

// A crash can leave: a journal naming the previous checkpoint (after a compaction's checkpoint,
// before the journal's restart), or a torn last record. Neither loses or repeats a change.
TEST(HostpathVolumeStore, ACrashDuringCompactionOrMidRecordLosesNothingAcknowledged) {
  test::TempDir dir;
  const auto journal = dir.path() / "controller-journal";
  {
    VolumeStore store(dir.path());
    ASSERT_EQ(store.prepare(), "");
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(store.transact([i](StoreTxn& txn) {
                    txn.put_volume(volume("v" + std::to_string(i)));
                    if (i == 4) txn.erase_volume("v0");
                    return grpc::Status::OK;
                  }).ok());
    }
    const auto old_journal = test::read_file(journal);
    ASSERT_TRUE(store.compact().ok());
    std::filesystem::remove(journal);
    test::write_file(journal, old_journal);  // the restart never happened
  }
  {
    VolumeStore store(dir.path());
    auto seen = read_all(store);
    EXPECT_EQ(seen.volumes.size(), 4u);
    EXPECT_FALSE(seen.volumes.contains("v0"));
    // The stale journal is restarted by the next change, not appended to.
    ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                  txn.put_volume(volume("v0"));
                  return grpc::Status::OK;
                }).ok());
    EXPECT_EQ(read_all(store).volumes.size(), 5u);
    // It follows the current checkpoint and holds only that change.
    durable::Journal restarted(journal);
    std::vector<std::string> records;
    ASSERT_FALSE(restarted.read_new(written(dir.path()).first, records));
    EXPECT_EQ(records.size(), 1u);
  }
  {
    std::ofstream torn(journal, std::ios::app | std::ios::binary);
    torn << "r 900 0123456789abcdef\n{\"volumes\":{\"v1\":null";  // cut off by the crash
  }
  VolumeStore store(dir.path());
  EXPECT_EQ(read_all(store).volumes.size(), 5u);
  ASSERT_TRUE(store.transact([](StoreTxn& txn) {
                txn.erase_volume("v1");
                return grpc::Status::OK;
              }).ok());
  VolumeStore restarted(dir.path());
  const auto seen = read_all(restarted);
  EXPECT_EQ(seen.volumes.size(), 4u);
  EXPECT_FALSE(seen.volumes.contains("v1"));
  EXPECT_TRUE(seen.volumes.contains("v0"));
}

// A compaction cut short leaves a checkpoint slot whose header is newer than its content. A store
// that caches in that state must still see the next compaction as new, and the records after it.
TEST(HostpathVolumeStore, AStoreThatCachedATornCheckpointSeesTheNextOne) {
  test::TempDir dir;
  VolumeStore a(dir.path()), b(dir.path());
  ASSERT_EQ(a.prepare(), "");
  ASSERT_TRUE(put_volume(a, "v1").ok());
  ASSERT_TRUE(a.compact().ok());  // generation 1, slot 0
  ASSERT_TRUE(put_volume(a, "v2").ok());
  ASSERT_TRUE(a.compact().ok());  // generation 2, slot 1
  ASSERT_TRUE(put_volume(a, "v3").ok());
  // A third compaction tears: slot 0 gets generation 3's header over bad content, the journal
  // is not restarted (it still follows generation 2 and holds v3).
  {
    auto slot = test::read_file(dir.path() / "controller-state.json.0");
    const auto body = slot.find('\n') + 1;
    slot = "mooring-slot 1 3 " + std::to_string(slot.size() - body) + " 0000000000000000\n" + slot.substr(body);
    std::ofstream(dir.path() / "controller-state.json.0", std::ios::binary | std::ios::trunc) << slot;
  }
  EXPECT_EQ(read_all(b).volumes.size(), 3u);  // b caches: checkpoint 2 + v3 from the journal
  ASSERT_TRUE(a.compact().ok());               // a writes a good checkpoint and restarts the journal
  ASSERT_TRUE(put_volume(a, "v4").ok());
  const auto seen = read_all(b);
  EXPECT_EQ(seen.volumes.size(), 4u);
  EXPECT_TRUE(seen.volumes.contains("v4"));
  ASSERT_TRUE(put_volume(b, "v5").ok());  // and b's change lands after a's, not over it
  VolumeStore fresh(dir.path());
  EXPECT_EQ(read_all(fresh).volumes.size(), 5u);
}

// Node calls in flight at once share the node record's writes (group commit): every change is
// in the file when its call returns, and there are never more writes than changes.
TEST(HostpathNodeState, ConcurrentChangesShareWritesAndAllLand) {
  test::TempDir dir;
  constexpr int kThreads = 8, kEach = 40;
  {
    NodeState state(dir.path(), {"node-a", 0, {}});
    ASSERT_EQ(state.open(), "");
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          const auto path = "/s/" + std::to_string(t) + "-" + std::to_string(i);
          if (!state.put_staged(path, {"vol-" + std::to_string(i), "/src", false})) ++failed;
          if (i % 2 == 1 && !state.erase_staged(path)) ++failed;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(state.snapshot().staged.size(), static_cast<std::size_t>(kThreads * kEach / 2));
  }
  const auto writes = durable::generation_of(dir.path() / "nodes" / "node-a.json");
  EXPECT_LE(writes, 1u + kThreads * kEach * 3 / 2);  // the registration, then at most one per change
  NodeState reopened(dir.path(), {"node-a", 0, {}});
  ASSERT_EQ(reopened.open(), "");
  const auto staged = reopened.snapshot().staged;
  EXPECT_EQ(staged.size(), static_cast<std::size_t>(kThreads * kEach / 2));
  EXPECT_TRUE(staged.contains("/s/7-38"));
  EXPECT_FALSE(staged.contains("/s/7-39"));
}

}  // namespace
}  // namespace mooring::hostpath
