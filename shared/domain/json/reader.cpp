// The Reader's typed field readers: each checks the JSON type and names the field when it fails.
#include "shared/domain/json/reader.hpp"

#include <limits>

#include "shared/domain/text.hpp"

namespace mooring::domain::codec {

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

std::string object_name(std::string_view kind, const json& j, std::string_view id_key) {
  if (j.is_object()) {
    auto it = j.find(id_key);
    if (it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
      std::string id = it->get<std::string>().substr(0, 128);
      return std::string(kind) + " \"" + id + "\"";
    }
  }
  return std::string(kind);
}

Reader::Reader(const json& j, Ctx& ctx, std::string path, bool strict)
    : j_(j), ctx_(ctx), path_(std::move(path)), strict_(strict) {
  if (j_.is_object()) return;
  if (path_.empty()) {
    set_error("expected a JSON object, got " + type_name(j_));
  } else {
    set_error("field \"" + path_.substr(0, path_.size() - 1) + "\": expected an object, got " + type_name(j_));
  }
}

const json* Reader::get(std::string_view key) {
  if (!ok() || !j_.is_object()) return nullptr;
  seen_.insert(std::string(key));
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool Reader::has(std::string_view key) const {
  if (!j_.is_object()) return false;
  auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

void Reader::fail(std::string_view key, const std::string& why) { set_error("field \"" + path(key) + "\": " + why); }

void Reader::fail_type(std::string_view key, const char* expected, const json& got) {
  fail(key, std::string("expected ") + expected + ", got " + type_name(got));
}

// API input: no NUL byte in any string. Strings reach argv, environments, paths and plugins'
// C strings, where a NUL silently cuts them short. (JSON text already is valid UTF-8.)
bool Reader::text_ok(std::string_view key, std::string_view value) {
  if (!strict_ || !has_nul(value)) return true;
  fail(key, "must not contain a NUL byte");
  return false;
}

bool Reader::key_ok(std::string_view key, std::string_view name) {
  if (!strict_ || !has_nul(name)) return true;
  fail(key, "a key must not contain a NUL byte");  // the key itself is not echoed
  return false;
}

void Reader::str(std::string_view key, std::string& out) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_string()) return fail_type(key, "a string", *v);
  if (!text_ok(key, v->get_ref<const std::string&>())) return;
  out = v->get<std::string>();
}

void Reader::boolean(std::string_view key, bool& out) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_boolean()) return fail_type(key, "a boolean", *v);
  out = v->get<bool>();
}

void Reader::i64(std::string_view key, std::int64_t& out, bool non_negative) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) return fail_type(key, "an integer", *v);
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
    return fail(key, "out of range");
  }
  const auto value = v->get<std::int64_t>();
  if (non_negative && value < 0) return fail(key, "must not be negative");
  out = value;
}

void Reader::i32(std::string_view key, int& out) {
  std::int64_t value = out;
  i64(key, value);
  if (!ok()) return;
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return fail(key, "out of range");
  }
  out = static_cast<int>(value);
}

void Reader::u64(std::string_view key, std::uint64_t& out) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) return fail_type(key, "an integer", *v);
  if (!v->is_number_unsigned() && v->get<std::int64_t>() < 0) return fail(key, "must not be negative");
  out = v->get<std::uint64_t>();
}

void Reader::string_map(std::string_view key, StringMap& out) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_object()) return fail_type(key, "an object of strings", *v);
  StringMap m;
  for (const auto& [k, val] : v->items()) {
    if (!key_ok(key, k)) return;
    if (!val.is_string()) return fail(std::string(key) + "." + k, "expected a string, got " + type_name(val));
    if (!text_ok(std::string(key) + "." + k, val.get_ref<const std::string&>())) return;
    m.emplace(k, val.get<std::string>());
  }
  out = std::move(m);
}

void Reader::string_list(std::string_view key, std::vector<std::string>& out) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_array()) return fail_type(key, "an array of strings", *v);
  std::vector<std::string> list;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    if (!item.is_string()) {
      return fail(std::string(key) + "[" + std::to_string(i) + "]", "expected a string, got " + type_name(item));
    }
    if (!text_ok(std::string(key) + "[" + std::to_string(i) + "]", item.get_ref<const std::string&>())) return;
    list.push_back(item.get<std::string>());
  }
  out = std::move(list);
}

void Reader::duration(std::string_view key, Duration& out) {
  parsed(key, out, "a duration string like \"30s\"", parse_duration);
}

void Reader::time(std::string_view key, Time& out) { parsed(key, out, "an RFC 3339 time string", parse_time); }

template <class T>
void Reader::parsed(std::string_view key, T& out, const char* expected, Expected<T> (*parse)(std::string_view)) {
  const json* v = get(key);
  if (v == nullptr) return;
  if (!v->is_string()) return fail_type(key, expected, *v);
  if (!text_ok(key, v->get_ref<const std::string&>())) return;
  auto value = parse(v->get<std::string>());
  if (!value) return fail(key, value.error());
  out = *value;
}

void Reader::finish() {
  if (!ok() || !strict_ || !j_.is_object()) return;
  for (const auto& [key, value] : j_.items()) {
    if (seen_.count(key) == 0) {
      set_error("unknown field \"" + path(key) + "\"");
      return;
    }
  }
}

void Reader::set_error(std::string message) {
  if (!ctx_.error) ctx_.error = ctx_.object + ": " + std::move(message);
}

}  // namespace mooring::domain::codec
