// Structured logging for every Mooring process: one line per event, logfmt or JSON lines,
// with a component name and key=value fields. Secrets are redacted at the source: any field
// whose key looks like a credential, and any value wrapped in log::Secret, prints [REDACTED].
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>

namespace mooring::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };
enum class Format { text, json };

// Parses "debug|info|warn|error" / "text|json"; returns false for anything else.
bool parse_level(std::string_view text, Level& out);
bool parse_format(std::string_view text, Format& out);
std::string_view to_string(Level level);

// Process-wide settings; safe to call at any time. `sink` defaults to std::cerr and must
// outlive all logging.
void configure(Level level, Format format, std::ostream* sink = nullptr);
Level level();

// A value that must never be printed (tokens, passwords, secret maps).
struct Secret {
  std::string_view ignored;
};

// True for keys that name credentials ("secrets", "password", "token", "api_key", ...).
bool is_secret_key(std::string_view key);

// A map rendered as {k=v,...} with every value redacted; used for secret maps and for any
// map whose values are not known to be safe.
std::string redacted_keys(const std::map<std::string, std::string>& values);

class Field {
 public:
  Field(std::string_view key, std::string_view value) : key_(key), value_(value) {}
  Field(std::string_view key, const char* value) : key_(key), value_(value ? value : "") {}
  Field(std::string_view key, const std::string& value) : key_(key), value_(value) {}
  Field(std::string_view key, bool value) : key_(key), value_(value ? "true" : "false"), quoted_(false) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Field(std::string_view key, T value)
      : key_(key), value_(std::to_string(value)), quoted_(false) {}
  Field(std::string_view key, double value);
  template <class Rep, class Period>
  Field(std::string_view key, std::chrono::duration<Rep, Period> d)
      : key_(key),
        value_(std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms"),
        quoted_(false) {}
  Field(std::string_view key, Secret) : key_(key), value_("[REDACTED]"), quoted_(false) {}
  Field(std::string_view key, const std::map<std::string, std::string>& values)
      : key_(key), value_(redacted_keys(values)) {}

  std::string_view key() const { return key_; }
  const std::string& value() const { return value_; }
  bool quoted() const { return quoted_; }

 private:
  std::string_view key_;
  std::string value_;
  bool quoted_ = true;
};

using Fields = std::initializer_list<Field>;

// Writes one event. Prefer Logger; this is what it calls.
void write(Level level, std::string_view component, std::string_view message, Fields fields);

// A cheap handle carrying the component name ("supervisor", "http", "claim-gc", ...).
class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  void debug(std::string_view msg, Fields f = {}) const { emit(Level::debug, msg, f); }
  void info(std::string_view msg, Fields f = {}) const { emit(Level::info, msg, f); }
  void warn(std::string_view msg, Fields f = {}) const { emit(Level::warn, msg, f); }
  void error(std::string_view msg, Fields f = {}) const { emit(Level::error, msg, f); }
  bool enabled(Level l) const { return l >= level(); }
  const std::string& component() const { return component_; }

 private:
  void emit(Level l, std::string_view msg, Fields f) const {
    if (enabled(l)) write(l, component_, msg, f);
  }
  std::string component_;
};

}  // namespace mooring::log
