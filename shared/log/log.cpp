#include "shared/log/log.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "shared/log/async_writer.hpp"

namespace mooring::log {
namespace {

std::atomic<Level> g_level{Level::info};
std::atomic<Format> g_format{Format::text};
std::atomic<std::ostream*> g_sink{nullptr};
std::mutex g_write_mutex;  // held while writing to the sink, by any thread

// The queue of an AsyncWriter. Never destroyed: a thread may log while main() returns.
struct AsyncQueue {
  std::mutex mutex;
  std::condition_variable wake;     // the writer waits here
  std::condition_variable written;  // flush() and callers waiting for room wait here
  std::string lines;
  std::uint64_t queued = 0;  // lines queued so far
  std::uint64_t written_upto = 0;
  bool active = false;  // an AsyncWriter runs: lines go to `lines`
  bool stopping = false;
  bool writer_idle = false;  // waiting for the first line after an idle spell
  bool urgent = false;       // a warn/error line, or someone in flush(): write now
  unsigned flushing = 0;
  AsyncWriter::Options options;
  std::thread thread;
};

AsyncQueue& async_queue() {
  static auto* q = new AsyncQueue;
  return *q;
}
std::atomic<bool> g_async{false};

void write_to_sink(std::string_view text) {
  std::ostream* sink = g_sink.load();
  std::lock_guard lock(g_write_mutex);
  std::ostream& os = sink ? *sink : std::cerr;
  os << text;
  os.flush();
  // A failed write (EPIPE: the reader of our output is gone; ENOSPC) loses these lines only: a
  // stream left in its failed state would drop every later line too, even once the sink recovers.
  if (!os) os.clear();
}

// False when no AsyncWriter runs (the caller writes itself).
bool enqueue(std::string_view line, Level lvl) {
  auto& q = async_queue();
  std::unique_lock lock(q.mutex);
  q.written.wait(lock, [&] { return !q.active || q.lines.size() < q.options.max_queued; });
  if (!q.active) return false;
  q.lines += line;
  ++q.queued;
  if (lvl >= Level::warn) q.urgent = true;
  if (q.writer_idle || q.urgent) q.wake.notify_one();
  return true;
}

void run_writer() {
  auto& q = async_queue();
  std::unique_lock lock(q.mutex);
  for (;;) {
    q.writer_idle = true;
    q.wake.wait(lock, [&] { return !q.lines.empty() || q.stopping; });
    q.writer_idle = false;
    // Gather what the next few milliseconds log into the same write.
    q.wake.wait_for(lock, q.options.batch_window, [&] { return q.urgent || q.stopping || q.flushing > 0; });
    std::string batch;
    batch.swap(q.lines);
    const std::uint64_t upto = q.queued;
    q.urgent = false;
    lock.unlock();
    if (!batch.empty()) write_to_sink(batch);
    lock.lock();
    q.written_upto = upto;
    if (q.stopping && q.lines.empty()) {
      q.active = false;  // from here on callers write themselves
      g_async = false;
      q.written.notify_all();
      return;
    }
    q.written.notify_all();
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::time_t t = system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

bool needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c <= ' ' || c == '"' || c == '=' || c >= 0x7f; });
}

void append_text_value(std::string& out, std::string_view s, bool quoted) {
  if (quoted && needs_quotes(s)) {
    append_json_string(out, s);  // JSON escaping is a valid logfmt quoting
  } else {
    out += s;
  }
}

}  // namespace

bool parse_level(std::string_view text, Level& out) {
  const std::string t = lower(text);
  if (t == "debug" || t == "trace")
    out = Level::debug;
  else if (t == "info")
    out = Level::info;
  else if (t == "warn" || t == "warning")
    out = Level::warn;
  else if (t == "error")
    out = Level::error;
  else
    return false;
  return true;
}

bool parse_format(std::string_view text, Format& out) {
  const std::string t = lower(text);
  if (t == "text" || t == "logfmt")
    out = Format::text;
  else if (t == "json")
    out = Format::json;
  else
    return false;
  return true;
}

std::string_view to_string(Level level) {
  static constexpr std::array<std::string_view, 4> names{"debug", "info", "warn", "error"};
  return names[static_cast<int>(level)];
}

void configure(Level level, Format format, std::ostream* sink) {
  flush();  // what is queued belongs to the old sink
  g_level = level;
  g_format = format;
  g_sink = sink;
}

Level level() { return g_level.load(std::memory_order_relaxed); }

bool is_secret_key(std::string_view key) {
  static constexpr std::array<std::string_view, 10> needles{"secret",        "password",    "passwd",  "token",
                                                            "credential",    "private_key", "api_key", "apikey",
                                                            "authorization", "mount_flags"};
  const std::string k = lower(key);
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return k.find(n) != std::string::npos; });
}

std::string redacted_keys(const std::map<std::string, std::string>& values) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : values) {
    (void)v;
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=[REDACTED]";
  }
  out += '}';
  return out;
}

Field::Field(std::string_view key, double value) : key_(key), quoted_(false) {
  std::ostringstream os;
  os << value;
  value_ = os.str();
}

void write(Level lvl, std::string_view component, std::string_view message, Fields fields) {
  std::string line;
  line.reserve(160);
  const bool json = g_format.load(std::memory_order_relaxed) == Format::json;
  if (json) {
    line += "{\"time\":";
    append_json_string(line, timestamp());
    line += ",\"level\":";
    append_json_string(line, to_string(lvl));
    line += ",\"component\":";
    append_json_string(line, component);
    line += ",\"msg\":";
    append_json_string(line, message);
    for (const auto& f : fields) {
      line += ',';
      append_json_string(line, f.key());
      line += ':';
      append_json_string(line, is_secret_key(f.key()) ? std::string_view("[REDACTED]") : std::string_view(f.value()));
    }
    line += "}\n";
  } else {
    line += timestamp();
    line += " level=";
    line += to_string(lvl);
    line += " component=";
    append_text_value(line, component, true);
    line += " msg=";
    append_json_string(line, message);
    for (const auto& f : fields) {
      line += ' ';
      line += f.key();
      line += '=';
      if (is_secret_key(f.key())) {
        line += "[REDACTED]";
      } else {
        append_text_value(line, f.value(), f.quoted());
      }
    }
    line += '\n';
  }
  if (g_async.load(std::memory_order_acquire) && enqueue(line, lvl)) return;
  write_to_sink(line);
}

AsyncWriter::AsyncWriter() : AsyncWriter(Options{}) {}

AsyncWriter::AsyncWriter(Options options) {
  auto& q = async_queue();
  std::lock_guard lock(q.mutex);
  if (q.active || q.thread.joinable()) return;  // one per process: this one stays inert
  q.options = options;
  q.active = true;
  q.stopping = false;
  q.thread = std::thread(run_writer);
  g_async = true;
  active_ = true;
}

AsyncWriter::~AsyncWriter() {
  if (!active_) return;
  auto& q = async_queue();
  {
    std::lock_guard lock(q.mutex);
    q.stopping = true;
    q.wake.notify_one();
  }
  q.thread.join();
  std::lock_guard lock(q.mutex);
  q.thread = std::thread();
  q.stopping = false;
}

void flush() {
  if (!g_async.load(std::memory_order_acquire)) return;
  auto& q = async_queue();
  std::unique_lock lock(q.mutex);
  if (!q.active) return;
  const std::uint64_t target = q.queued;
  ++q.flushing;
  q.wake.notify_one();
  q.written.wait(lock, [&] { return !q.active || q.written_upto >= target; });
  --q.flushing;
}

}  // namespace mooring::log
