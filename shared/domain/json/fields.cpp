// Writers shared by every table: string maps and string lists, with their API redaction.
#include "shared/domain/json/fields.hpp"

#include "shared/domain/json.hpp"
#include "shared/log/log.hpp"

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

}  // namespace mooring::domain::codec
