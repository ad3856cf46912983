// `mooring operator keyring rotate [-root]`: a new data key for the secrets sealed in the control
// plane's state (every sealed row re-sealed, the old data keys dropped), or with -root the data
// keys re-wrapped with the keyring file's active root key (README.md, "Secrets").
#include "cli/commands.hpp"
#include "cli/context.hpp"

#include <nlohmann/json.hpp>

namespace mooring::cli {
namespace {

int keyring_rotate(Context& ctx, const Invocation& inv) {
  const bool root = inv.enabled("root");
  auto r = ctx.call("PUT", root ? "/v1/operator/keyring/rotate?root=true" : "/v1/operator/keyring/rotate");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const auto& b = r->body;
  if (root)
    ctx.out() << "Data keys re-wrapped with root key " << b.value("RootKeyID", "");
  else
    ctx.out() << "Keyring rotated: active data key " << b.value("KeyID", "") << ", " << b.value("RowsResealed", 0)
              << " state rows re-sealed";
  if (b.contains("RetiredKeys") && b["RetiredKeys"].is_array() && !b["RetiredKeys"].empty()) {
    ctx.out() << (root ? "; no longer used (remove it from every keyring file):" : ", retired");
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
           .flags = {{"root", false, "", "re-wrap the data keys with the keyring file's active root key"}},
           .summary = "Seal the stored secrets with a new data key (or -root: re-wrap the data keys)",
           .run = keyring_rotate}};
}

}  // namespace mooring::cli
