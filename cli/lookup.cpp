#include "cli/lookup.hpp"

#include "cli/format.hpp"

namespace mooring::cli {

using nlohmann::json;

json matching_prefix(const json& list, std::string_view prefix) {
  json out = json::array();
  if (!list.is_array()) return out;
  for (const auto& item : list)
    if (field(item, "ID").starts_with(prefix)) out.push_back(item);
  return out;
}

int report_candidates(Context& ctx, const ObjectKind& kind, const std::string& ref, const json& matches) {
  ctx.err() << "Error: \"" << ref << "\" matches " << matches.size() << " " << kind.plural
            << "; give more of the ID:\n\n"
            << kind.table(matches);
  return kExitError;
}

std::optional<ApiReply> get_by_id_or_prefix(Context& ctx, const ObjectKind& kind, const std::string& ref,
                                            const std::string& query) {
  auto exact = ctx.attempt("GET", kind.item_path + url_encode(ref) + query);
  if (auto* reply = std::get_if<ApiReply>(&exact)) return std::move(*reply);
  const auto& failure = std::get<CallFailure>(exact);
  if (failure.status != 404) return ctx.fail(failure.message), std::nullopt;
  auto list = ctx.attempt("GET", kind.list_path);
  if (!std::holds_alternative<ApiReply>(list)) return ctx.fail(failure.message), std::nullopt;
  const json matches = matching_prefix(std::get<ApiReply>(list).body, ref);
  if (matches.empty()) {
    ctx.fail("no " + kind.singular + " has the ID or ID prefix \"" + ref + "\" (`" + kind.list_command +
             "` lists them)");
    return std::nullopt;
  }
  if (matches.size() > 1) return report_candidates(ctx, kind, ref, matches), std::nullopt;
  return ctx.call("GET", kind.item_path + url_encode(field(matches[0], "ID")) + query);
}

}  // namespace mooring::cli
