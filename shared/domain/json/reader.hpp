// Decoding primitives shared by every JSON codec: one Reader per object that tracks which fields
// were read (so strict API input rejects unknown fields) and names the field path in every error.
#pragma once

#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::domain::codec {

using nlohmann::json;
using StringMap = std::map<std::string, std::string>;

// "integer" / "number" / nlohmann's names for the rest, as errors spell the type they got.
std::string type_name(const json& j);

// `kind "id"` when the object carries a non-empty string id under `id_key`, else `kind`.
std::string object_name(std::string_view kind, const json& j, std::string_view id_key);

// Error state shared by a reader and its children: the first error wins.
struct Ctx {
  std::string object;  // `volume "vol-1"`
  std::optional<std::string> error;
};

template <class T>
Expected<T> finish(Ctx& ctx, T value) {
  if (ctx.error) return error(*ctx.error);
  return value;
}

class Reader {
 public:
  Reader(const json& j, Ctx& ctx, std::string path, bool strict);

  bool ok() const { return !ctx_.error.has_value(); }
  // Strict readers decode API input: unknown fields are errors.
  bool strict() const { return strict_; }
  std::string path(std::string_view key) const { return path_ + std::string(key); }

  // The value for `key`, or nullptr when absent or null (null means "not set", as Go clients send).
  const json* get(std::string_view key);
  bool has(std::string_view key) const;

  void fail(std::string_view key, const std::string& why);
  void fail_type(std::string_view key, const char* expected, const json& got);

  void str(std::string_view key, std::string& out);
  void boolean(std::string_view key, bool& out);
  void i64(std::string_view key, std::int64_t& out, bool non_negative = false);
  void i32(std::string_view key, int& out);
  void u64(std::string_view key, std::uint64_t& out);
  void string_map(std::string_view key, StringMap& out);
  void string_list(std::string_view key, std::vector<std::string>& out);
  void duration(std::string_view key, Duration& out);
  void time(std::string_view key, Time& out);

  template <class E>
  void enumeration(std::string_view key, E& out, std::optional<E> (*parse)(std::string_view), const char* what) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return fail_type(key, "a string", *v);
    if (!text_ok(key, v->get_ref<const std::string&>())) return;
    const auto text = v->get<std::string>();
    auto value = parse(text);
    if (!value) return fail(key, std::string("unknown ") + what + " \"" + text + "\"");
    out = *value;
  }

  // Calls f(Reader&) for a nested object.
  template <class F>
  void object(std::string_view key, F&& f) {
    if (const json* v = get(key)) child(*v, path(key) + ".", f);
  }
  // Calls f(Reader&) for each object of an array.
  template <class F>
  void object_array(std::string_view key, F&& f) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return fail_type(key, "an array", *v);
    for (std::size_t i = 0; i < v->size() && ok(); ++i) child((*v)[i], path(key) + "[" + std::to_string(i) + "].", f);
  }
  // Calls f(Reader&, name) for each object value of a map.
  template <class F>
  void object_map(std::string_view key, F&& f) {
    const json* v = get(key);
    if (v == nullptr) return;
    if (!v->is_object()) return fail_type(key, "an object", *v);
    for (const auto& [name, item] : v->items()) {
      if (!ok()) return;
      if (!key_ok(key, name)) return;
      child(item, path(key) + "." + name + ".", [&](Reader& c) { f(c, name); });
    }
  }

  // Strict readers reject fields they did not read.
  void finish();

 private:
  template <class F>
  void child(const json& j, std::string path, F&& f) {
    Reader c(j, ctx_, std::move(path), strict_);
    if (!c.ok()) return;
    f(c);
    c.finish();
  }
  // A string field parsed by `parse`; its error names the field.
  template <class T>
  void parsed(std::string_view key, T& out, const char* expected, Expected<T> (*parse)(std::string_view));
  void set_error(std::string message);
  // Strict input: false (and the error set) when `value` holds a NUL byte.
  bool text_ok(std::string_view key, std::string_view value);
  bool key_ok(std::string_view key, std::string_view name);  // the same for a map's key

  const json& j_;
  Ctx& ctx_;
  std::string path_;
  bool strict_;
  std::set<std::string> seen_;
};

}  // namespace mooring::domain::codec
