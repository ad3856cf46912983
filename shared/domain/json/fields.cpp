// Writers shared by every table: string maps and string lists, with their API redaction, as DOM
// values and as text.
#include "shared/domain/json/fields.hpp"

#include "shared/domain/json.hpp"
#include "shared/log/log.hpp"

#include <algorithm>

namespace mooring::domain::codec {

// Values under credential-looking keys are shown as [REDACTED] (env vars, event details).
json string_map_json(const StringMap& m, bool redact) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = redact && log::is_secret_key(k) ? std::string(kRedacted) : v;
  return out;
}

std::optional<json> secret_map_json(const StringMap& m, View view) {
  if (m.empty()) return std::nullopt;
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = view == View::storage ? v : std::string(kRedacted);
  return out;
}

// A redacted list (mount flags) shows one [REDACTED] when it has any entry.
json string_list_json(const std::vector<std::string>& list, bool redact) {
  json out = json::array();
  if (redact) {
    if (!list.empty()) out.push_back(kRedacted);
  } else {
    for (const auto& item : list) out.push_back(item);
  }
  return out;
}

void append_json_string(std::string& out, std::string_view s) {
  // Printable ASCII other than '"' and '\\' is written as is; anything else (control
  // characters, UTF-8 to validate) takes nlohmann's own escaping, so the text stays its dump().
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (!plain) return append_json_dump(out, json(std::string(s)));
  out += '"';
  out += s;
  out += '"';
}

void append_json_dump(std::string& out, const json& j) { out += j.dump(); }

// format_time spells digits and punctuation only: nothing to escape.
void append_time_text(std::string& out, Time t) {
  out += '"';
  out += format_time(t);
  out += '"';
}

void append_string_map(std::string& out, const StringMap& m, bool redact, bool masked) {
  out += '{';
  for (bool first = true; const auto& [k, v] : m) {
    if (!std::exchange(first, false)) out += ',';
    append_json_string(out, k);
    out += ':';
    append_json_string(out, masked || (redact && log::is_secret_key(k)) ? std::string_view(kRedacted) : v);
  }
  out += '}';
}

void append_string_list(std::string& out, const std::vector<std::string>& list, bool redact) {
  if (redact) {
    out += list.empty() ? "[]" : "[\"" + std::string(kRedacted) + "\"]";
    return;
  }
  out += '[';
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, list[i]);
  }
  out += ']';
}

}  // namespace mooring::domain::codec
