#include "shared/log/async_writer.hpp"
#include "shared/log/log.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace mooring::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { configure(Level::info, Format::text, nullptr); }
  std::ostringstream out_;
};

TEST_F(LogTest, TextLineCarriesComponentMessageAndFields) {
  configure(Level::debug, Format::text, &out_);
  Logger("supervisor").info("plugin became healthy", {{"plugin_id", "hostpath"}, {"attempt", 3}, {"ok", true}});
  const std::string line = out_.str();
  EXPECT_NE(line.find("level=info"), std::string::npos);
  EXPECT_NE(line.find("component=supervisor"), std::string::npos);
  EXPECT_NE(line.find("msg=\"plugin became healthy\""), std::string::npos);
  EXPECT_NE(line.find("plugin_id=hostpath"), std::string::npos);
  EXPECT_NE(line.find("attempt=3"), std::string::npos);
  EXPECT_NE(line.find("ok=true"), std::string::npos);
  EXPECT_EQ(line.back(), '\n');
}

// A write that failed (EPIPE once the reader of our output died, ENOSPC) costs those lines only:
// the lines after it are written when the sink takes them again.
TEST_F(LogTest, AFailedWriteDoesNotSilenceTheLinesAfterIt) {
  configure(Level::debug, Format::text, &out_);
  out_.setstate(std::ios::badbit);  // as a write(2) that failed leaves the stream
  Logger("x").info("lost");
  Logger("x").info("written");
  EXPECT_EQ(out_.str().find("lost"), std::string::npos);
  EXPECT_NE(out_.str().find("written"), std::string::npos) << out_.str();
}

TEST_F(LogTest, ValuesWithSpacesAreQuotedAndEscaped) {
  configure(Level::debug, Format::text, &out_);
  Logger("x").warn("m", {{"error", "deadline \"exceeded\" now"}});
  EXPECT_NE(out_.str().find(R"(error="deadline \"exceeded\" now")"), std::string::npos);
}

TEST_F(LogTest, SecretKeysAreRedactedInTextAndJson) {
  for (Format f : {Format::text, Format::json}) {
    out_.str("");
    configure(Level::debug, f, &out_);
    Logger("x").info("claim", {{"secrets", "hunter2"}, {"api_token", "abc"}, {"volume_id", "vol-1"}});
    const std::string line = out_.str();
    EXPECT_EQ(line.find("hunter2"), std::string::npos) << line;
    EXPECT_EQ(line.find("abc"), std::string::npos) << line;
    EXPECT_NE(line.find("vol-1"), std::string::npos) << line;
    EXPECT_NE(line.find("[REDACTED]"), std::string::npos) << line;
  }
}

TEST_F(LogTest, SecretWrapperAndMapsNeverPrintValues) {
  configure(Level::debug, Format::text, &out_);
  std::map<std::string, std::string> m{{"user", "admin"}, {"pass", "s3cr3t"}};
  Logger("x").info("m", {{"value", Secret{"s3cr3t"}}, {"context", m}});
  const std::string line = out_.str();
  EXPECT_EQ(line.find("s3cr3t"), std::string::npos) << line;
  EXPECT_EQ(line.find("admin"), std::string::npos) << line;
  EXPECT_NE(line.find("user=[REDACTED]"), std::string::npos) << line;
}

TEST_F(LogTest, JsonLineIsOneObjectWithEscapes) {
  configure(Level::debug, Format::json, &out_);
  Logger("http").error("bad \"input\"", {{"path", "/v1/x\n"}, {"n", 7}});
  const std::string line = out_.str();
  EXPECT_EQ(line.front(), '{');
  EXPECT_NE(line.find(R"("msg":"bad \"input\"")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("path":"/v1/x\n")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("n":"7")"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST_F(LogTest, LevelFiltersLowerEvents) {
  configure(Level::warn, Format::text, &out_);
  Logger l("x");
  l.info("hidden");
  l.debug("hidden");
  l.warn("shown");
  EXPECT_EQ(out_.str().find("hidden"), std::string::npos);
  EXPECT_NE(out_.str().find("shown"), std::string::npos);
}

TEST(LogParse, LevelsAndFormats) {
  Level l{};
  Format f{};
  EXPECT_TRUE(parse_level("DEBUG", l));
  EXPECT_EQ(l, Level::debug);
  EXPECT_TRUE(parse_level("warning", l));
  EXPECT_EQ(l, Level::warn);
  EXPECT_FALSE(parse_level("loud", l));
  EXPECT_TRUE(parse_format("json", f));
  EXPECT_EQ(f, Format::json);
  EXPECT_FALSE(parse_format("xml", f));
}

TEST(LogSecretKeys, RecognisesCredentialNames) {
  EXPECT_TRUE(is_secret_key("Secrets"));
  EXPECT_TRUE(is_secret_key("X-Mooring-CSI-Secrets"));
  EXPECT_TRUE(is_secret_key("password"));
  EXPECT_TRUE(is_secret_key("mount_flags"));
  EXPECT_FALSE(is_secret_key("volume_id"));
  EXPECT_FALSE(is_secret_key("plugin_id"));
}

// A sink that holds every write until opened, as a full pipe or a stalled disk would.
class GatedBuf : public std::streambuf {
 public:
  void open() {
    std::lock_guard lock(m_);
    open_ = true;
    cv_.notify_all();
  }
  std::string text() {
    std::lock_guard lock(m_);
    return text_;
  }
  int writes() {
    std::lock_guard lock(m_);
    return writes_;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return open_; });
    text_.append(s, static_cast<std::size_t>(n));
    ++writes_;
    return n;
  }
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
  std::string text_;
  int writes_ = 0;
};

// The process's log sink for one test: a GatedBuf, open or not; the default sink again after.
struct GatedSink {
  explicit GatedSink(bool open) {
    if (open) buf.open();
    configure(Level::info, Format::text, &os);
  }
  ~GatedSink() { configure(Level::info, Format::text, nullptr); }
  GatedBuf buf;
  std::ostream os{&buf};
};

// Opens the gate when a test leaves its scope early, so the writer's join cannot hang.
struct OpenAtExit {
  GatedBuf& buf;
  ~OpenAtExit() { buf.open(); }
};

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

TEST_F(LogTest, AsyncWriterCallersDoNotWaitForAStalledSink) {
  GatedSink sink(false);
  GatedBuf& buf = sink.buf;
  {
    AsyncWriter writer;
    // On another thread, so a caller that does wait fails the test instead of hanging it.
    auto logged = std::async(std::launch::async, [] {
      for (int i = 0; i < 100; ++i) Logger("runner").info("allocation event", {{"n", i}});
    });
    OpenAtExit guard{buf};  // destroyed before the future and the writer, which may wait on the gate
    ASSERT_EQ(logged.wait_for(std::chrono::seconds(10)), std::future_status::ready)
        << "a log call waited for the sink";
    EXPECT_EQ(buf.text(), "");
    buf.open();
    flush();
    EXPECT_EQ(count_of(buf.text(), "msg=\"allocation event\""), 100u);
    EXPECT_NE(buf.text().find("n=99"), std::string::npos);
  }
}

TEST_F(LogTest, AsyncWriterWritesEveryLineInOrderBeforeItStops) {
  GatedSink sink(true);
  GatedBuf& buf = sink.buf;
  constexpr int kThreads = 4, kLines = 2000;
  {
    AsyncWriter writer(AsyncWriter::Options{.batch_window = std::chrono::milliseconds(5), .max_queued = 4096});
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([t] {
        for (int i = 0; i < kLines; ++i) Logger("t" + std::to_string(t)).info("line", {{"i", i}});
      });
    for (auto& th : threads) th.join();
  }  // no flush(): stopping the writer must write what is queued
  const std::string text = buf.text();
  EXPECT_EQ(count_of(text, "\n"), static_cast<std::size_t>(kThreads * kLines));
  for (int t = 0; t < kThreads; ++t) {
    std::size_t pos = 0;
    for (int i = 0; i < kLines; ++i) {
      pos = text.find("component=t" + std::to_string(t) + " msg=\"line\" i=" + std::to_string(i) + "\n", pos);
      ASSERT_NE(pos, std::string::npos) << "thread " << t << " line " << i << " missing or out of order";
    }
  }
  // Batched: far fewer writes than lines (4096-byte queue bound, ~90-byte lines).
  EXPECT_LT(buf.writes(), kThreads * kLines / 4);
}

TEST_F(LogTest, AsyncWriterWritesWarningsWithoutWaitingForTheWindow) {
  GatedSink sink(true);
  GatedBuf& buf = sink.buf;
  {
    AsyncWriter writer(AsyncWriter::Options{.batch_window = std::chrono::seconds(60), .max_queued = 1u << 20});
    Logger("x").info("routine");  // the writer wakes and starts a 60 s window
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Logger("x").warn("plugin crashed");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (buf.text().find("plugin crashed") == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::string text = buf.text();
    EXPECT_NE(text.find("plugin crashed"), std::string::npos) << "the warning waited for the batch window";
    EXPECT_LT(text.find("routine"), text.find("plugin crashed"));
  }
}

TEST_F(LogTest, ASecondAsyncWriterIsInertAndLeavesTheFirstRunning) {
  GatedSink sink(false);
  GatedBuf& buf = sink.buf;
  {
    AsyncWriter first;
    { AsyncWriter second; }
    // Still queued by the first: a caller does not wait for the stalled sink.
    auto logged = std::async(std::launch::async, [] { Logger("x").info("queued by the first"); });
    OpenAtExit guard{buf};
    ASSERT_EQ(logged.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    buf.open();
  }
  EXPECT_NE(buf.text().find("queued by the first"), std::string::npos);
}

TEST_F(LogTest, WithoutAnAsyncWriterLinesAreWrittenAtOnce) {
  configure(Level::info, Format::text, &out_);
  { AsyncWriter writer; }
  Logger("x").info("after the writer stopped");
  EXPECT_NE(out_.str().find("after the writer stopped"), std::string::npos);
}

}  // namespace
}  // namespace mooring::log
