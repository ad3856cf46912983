// `mooring operator keyring rotate`: a new active key for the secrets sealed in the control
// plane's state, every sealed row re-sealed with it and the old keys dropped.
#include "cli/commands.hpp"
#include "cli/context.hpp"

#include <nlohmann/json.hpp>

namespace mooring::cli {
namespace {

int keyring_rotate(Context& ctx, const Invocation&) {
  auto r = ctx.call("PUT", "/v1/operator/keyring/rotate");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const auto& b = r->body;
  ctx.out() << "Keyring rotated: active key " << b.value("KeyID", "") << ", "
            << b.value("RowsResealed", 0) << " state rows re-sealed";
  if (b.contains("RetiredKeys") && b["RetiredKeys"].is_array() && !b["RetiredKeys"].empty()) {
    ctx.out() << ", retired";
    for (const auto& k : b["RetiredKeys"]) ctx.out() << " " << k.get<std::string>();
  }
  ctx.out() << "\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> operator_commands() {
  return {{.words = {"operator", "keyring", "rotate"},
           .arguments = "",
           .min_args = 0,
           .max_args = 0,
           .summary = "Seal the control plane's stored secrets with a new key and retire the old ones",
           .run = keyring_rotate}};
}

}  // namespace mooring::cli
