// CLI room: the object a status command names, by its ID or a unique ID prefix, as Nomad finds
// it: the exact ID first; after a 404 the list is searched, and several matches are listed as
// candidates instead of an error that says nothing about them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"

namespace mooring::cli {

struct ObjectKind {
  std::string singular;                                           // "volume"
  std::string plural;                                             // "volumes"
  std::string item_path;                                          // "/v1/volume/csi/": the ID (URL-encoded) is appended
  std::string list_path;                                          // "/v1/volumes"
  std::string list_command;                                       // "mooring volume status": what lists them all
  std::function<std::string(const nlohmann::json& items)> table;  // the candidates, as the list shows them
};

// The items of the API list `list` whose "ID" starts with `prefix`, in the list's order.
nlohmann::json matching_prefix(const nlohmann::json& list, std::string_view prefix);

// "Error: "da" matches 2 volumes; give more of the ID:" and the candidates' table, on stderr.
int report_candidates(Context& ctx, const ObjectKind& kind, const std::string& ref, const nlohmann::json& matches);

// GET of the object `ref` names (`query` appended to its path, e.g. "?stats=refresh"), or nullopt
// after printing why not: the API's error, no match, or the candidates.
std::optional<ApiReply> get_by_id_or_prefix(Context& ctx, const ObjectKind& kind, const std::string& ref,
                                            const std::string& query = "");

}  // namespace mooring::cli
