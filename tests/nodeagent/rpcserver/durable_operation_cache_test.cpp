// The operation cache's durable record: what survives an agent restart, in which order it
// reaches the disk, and what a torn or corrupt file does (nothing but a warning).
#include "services/nodeagent/rpcserver/operation_cache.hpp"
#include "services/nodeagent/rpcserver/operation_log.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/shared/async/run_coro.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Kind = OperationRecord::Kind;
using Source = OperationCache::Source;

bool keep_ok(const grpc::Status& st) { return st.ok(); }

// What a reader finds on disk now (a second reader, as the restarted agent would be).
std::vector<OperationRecord> on_disk(const std::filesystem::path& file, std::vector<std::string>* warnings = nullptr) {
  std::vector<std::string> w;
  auto records = OperationLog(file).load(w);
  if (warnings) *warnings = w;
  return records;
}

std::vector<std::pair<Kind, std::string>> kinds(const std::vector<OperationRecord>& records) {
  std::vector<std::pair<Kind, std::string>> out;
  for (const auto& r : records) out.emplace_back(r.kind, r.key);
  return out;
}

// One agent life: an io_context and a durable cache over `file`.
struct Life {
  explicit Life(const std::filesystem::path& file, OperationCacheOptions o = {}) : cache(io.get_executor(), with(o, file)) {}
  static OperationCacheOptions with(OperationCacheOptions o, const std::filesystem::path& file) {
    o.file = file;
    return o;
  }
  OperationCache::Result run(const std::string& key, std::function<OperationAnswer()> plugin,
                             OperationCache::Resolve resolve = {}, std::uint64_t fingerprint = 7) {
    OperationCache::Result out;
    io.restart();  // run_coro leaves it stopped
    async::run_coro(io, [&]() -> asio::awaitable<void> {
      OperationCache::Call call = [plugin]() -> asio::awaitable<OperationAnswer> { co_return plugin(); };
      out = co_await cache.run(key, fingerprint, call, keep_ok, resolve);
    }());
    return out;
  }
  asio::io_context io;
  OperationCache cache;
};

OperationAnswer ok(std::string response) { return {grpc::Status::OK, std::move(response)}; }

TEST(DurableOperationCache, AResultIsAnsweredAfterARestartWithoutThePlugin) {
  test::TempDir dir("opcache");
  int calls = 0;
  {
    Life life(dir / "operations");
    auto first = life.run("publish-1", [&] { ++calls; return ok("ctx-a"); });
    EXPECT_EQ(first.source, Source::plugin);
  }
  Life restarted(dir / "operations");
  EXPECT_EQ(restarted.cache.kept(), 1u);
  auto again = restarted.run("publish-1", [&] { ++calls; return ok("ctx-b"); });
  EXPECT_EQ(again.source, Source::cached);
  EXPECT_EQ(again.answer.response, "ctx-a");
  EXPECT_EQ(calls, 1);
}

TEST(DurableOperationCache, TheIntentIsFlushedBeforeThePluginHearsTheCallAndTheResultBeforeTheCaller) {
  test::TempDir dir("opcache");
  const auto file = dir / "operations";
  Life life(file);
  std::vector<std::pair<Kind, std::string>> seen_by_plugin;
  auto result = life.run("unpublish-1", [&] {
    seen_by_plugin = kinds(on_disk(file));  // read while the call is with the plugin
    return ok("");
  });
  // Nothing waited after the answer: what the caller got is already on disk.
  const auto after = kinds(on_disk(file));
  EXPECT_EQ(seen_by_plugin, (std::vector<std::pair<Kind, std::string>>{{Kind::intent, "unpublish-1"}}));
  EXPECT_EQ(after, (std::vector<std::pair<Kind, std::string>>{{Kind::intent, "unpublish-1"}, {Kind::result, "unpublish-1"}}));
  EXPECT_TRUE(result.answer.status.ok());
}

TEST(DurableOperationCache, AnAnswerThatIsNotKeptLeavesOnlyItsIntentAndIsAskedAgain) {
  test::TempDir dir("opcache");
  Life life(dir / "operations");
  int calls = 0;
  life.run("publish-1", [&] { ++calls; return OperationAnswer{grpc::Status(grpc::StatusCode::UNAVAILABLE, "busy"), {}}; });
  EXPECT_EQ(kinds(on_disk(dir / "operations")), (std::vector<std::pair<Kind, std::string>>{{Kind::intent, "publish-1"}}));
  auto again = life.run("publish-1", [&] { ++calls; return ok("ctx"); });
  EXPECT_EQ(again.source, Source::plugin);
  EXPECT_EQ(calls, 2);
}

// The agent died mid-call: the intent is on disk, the result is not.
void die_mid_call(const std::filesystem::path& file, const std::string& key, std::uint64_t fingerprint = 7) {
  OperationLog log(file);
  std::vector<std::string> warnings;
  log.load(warnings);
  ASSERT_FALSE(log.append({.kind = Kind::intent, .key = key, .fingerprint = fingerprint,
                           .at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch()).count()}));
}

TEST(DurableOperationCache, ACallCutOffByARestartIsSentAgainWhenThePluginCannotTell) {
  test::TempDir dir("opcache");
  die_mid_call(dir / "operations", "publish-1");
  Life life(dir / "operations");
  EXPECT_EQ(life.cache.in_doubt(), 1u);
  int calls = 0;
  auto resend = life.run("publish-1", [&] { ++calls; return ok("ctx"); });
  EXPECT_EQ(resend.source, Source::plugin);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(life.cache.in_doubt(), 0u);
  // Now kept: a further resend is answered from the result.
  EXPECT_EQ(life.run("publish-1", [&] { ++calls; return ok("other"); }).source, Source::cached);
  EXPECT_EQ(calls, 1);
}

TEST(DurableOperationCache, ACallCutOffByARestartIsAnsweredByThePluginsOutcomeWhenItTells) {
  test::TempDir dir("opcache");
  die_mid_call(dir / "operations", "unpublish-1");
  die_mid_call(dir / "operations", "unpublish-2");
  Life life(dir / "operations");
  int calls = 0, asked = 0;
  auto told = life.run("unpublish-1", [&] { ++calls; return ok(""); },
                       [&]() -> asio::awaitable<std::optional<OperationAnswer>> {
                         ++asked;
                         co_return ok("");  // the plugin says: no longer published
                       });
  EXPECT_EQ(told.source, Source::resolved);
  EXPECT_EQ(calls, 0);
  auto untold = life.run("unpublish-2", [&] { ++calls; return ok(""); },
                         [&]() -> asio::awaitable<std::optional<OperationAnswer>> {
                           ++asked;
                           co_return std::nullopt;  // still published, or cannot tell
                         });
  EXPECT_EQ(untold.source, Source::plugin);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(asked, 2);
  // A call this life sent itself is never "resolved": the plugin is not asked for a new id.
  life.run("unpublish-3", [&] { ++calls; return ok(""); },
           [&]() -> asio::awaitable<std::optional<OperationAnswer>> {
             ++asked;
             co_return ok("");
           });
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(calls, 2);
}

TEST(DurableOperationCache, ATornJournalTailLosesOnlyTheRecordItCutAndIsReported) {
  test::TempDir dir("opcache");
  const auto file = dir / "operations";
  {
    Life life(file);
    life.run("publish-1", [] { return ok("ctx-1"); });
    life.run("publish-2", [] { return ok("ctx-2"); });
  }
  // Cut the journal inside its last record (publish-2's result).
  const auto journal = OperationLog(file).journal_file();
  std::filesystem::resize_file(journal, std::filesystem::file_size(journal) - 3);
  std::vector<std::string> warnings;
  EXPECT_EQ(kinds(on_disk(file, &warnings)),
            (std::vector<std::pair<Kind, std::string>>{{Kind::intent, "publish-1"}, {Kind::result, "publish-1"},
                                                       {Kind::intent, "publish-2"}}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(journal.string()), std::string::npos) << warnings[0];
  Life restarted(file);
  EXPECT_EQ(restarted.cache.kept(), 1u);
  EXPECT_EQ(restarted.cache.in_doubt(), 1u);  // publish-2: its outcome is unknown
}

TEST(DurableOperationCache, ACorruptCheckpointStartsEmptyWithAWarningNamingItAndKeepsWorking) {
  test::TempDir dir("opcache");
  const auto file = dir / "operations";
  {
    Life life(file);
    life.run("publish-1", [] { return ok("ctx-1"); });
  }
  for (const char* slot : {".0", ".1"}) std::ofstream(file.string() + slot, std::ios::trunc) << "mooring-slot 1 9 40 0\ngarbage";
  std::vector<std::string> warnings;
  EXPECT_TRUE(on_disk(file, &warnings).empty());
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find(file.string() + ": the checkpoint cannot be read"), std::string::npos) << warnings[0];
  {
    Life life(file);  // starts, empty
    EXPECT_EQ(life.cache.kept(), 0u);
    life.run("publish-2", [] { return ok("ctx-2"); });
  }
  warnings.clear();
  EXPECT_EQ(kinds(on_disk(file, &warnings)),  // the reset files work again
            (std::vector<std::pair<Kind, std::string>>{{Kind::intent, "publish-2"}, {Kind::result, "publish-2"}}));
  EXPECT_TRUE(warnings.empty());
}

TEST(DurableOperationCache, RecordsOlderThanTheTtlAndBeyondTheLimitAreNotRestored) {
  test::TempDir dir("opcache");
  const auto file = dir / "operations";
  {
    Life life(file, {.ttl = 10min, .max_entries = 3});
    for (int i = 0; i < 5; ++i) life.run("op-" + std::to_string(i), [] { return ok("ctx"); });
    EXPECT_EQ(life.cache.kept(), 3u);
  }
  {
    Life life(file, {.ttl = 10min, .max_entries = 3});
    EXPECT_EQ(life.cache.kept(), 3u);
    EXPECT_EQ(life.run("op-0", [] { return ok("new"); }).source, Source::plugin);  // the oldest went
    EXPECT_EQ(life.run("op-4", [] { return ok("new"); }).source, Source::cached);
  }
  // A start compacts: the checkpoint holds the live records only.
  { Life life(file, {.ttl = 10min, .max_entries = 3}); }
  EXPECT_EQ(on_disk(file).size(), 3u);
  std::this_thread::sleep_for(150ms);
  Life late(file, {.ttl = 100ms, .max_entries = 3});
  EXPECT_EQ(late.cache.kept(), 0u);
  EXPECT_TRUE(on_disk(file).empty());
}

TEST(DurableOperationCache, TheJournalIsCompactedIntoTheCheckpointAndNothingIsLost) {
  test::TempDir dir("opcache");
  const auto file = dir / "operations";
  const int n = 700;  // 1,400 records: past the 1,024 + 2 × live threshold once
  {
    Life life(file, {.ttl = 10min, .max_entries = 100});
    for (int i = 0; i < n; ++i) life.run("op-" + std::to_string(i), [] { return ok("ctx"); });
    life.io.restart();
    async::run_coro(life.io, life.cache.flushed());
    EXPECT_LT(on_disk(file).size(), 400u);  // a checkpoint of ≤ 100 results and a short journal, not 1,200
  }
  Life restarted(file, {.ttl = 10min, .max_entries = 100});
  EXPECT_EQ(restarted.cache.kept(), 100u);
  EXPECT_EQ(restarted.run("op-699", [] { return ok("new"); }).source, Source::cached);
}

}  // namespace
}  // namespace mooring::nodeagent
