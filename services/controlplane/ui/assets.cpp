#include "services/controlplane/ui/assets.hpp"

namespace mooring::controlplane::ui {

namespace {

std::string_view content_type_of(std::string_view path) {
  auto ends = [&](std::string_view ext) { return path.ends_with(ext); };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".json")) return "application/json";
  return "application/octet-stream";
}

}  // namespace

std::optional<Asset> find_asset(std::string_view path) {
  if (path.empty()) path = "index.html";
  for (const auto& f : embedded_files())
    if (f.path == path) return Asset{f.body, content_type_of(path)};
  return std::nullopt;
}

std::string_view content_security_policy() {
  return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
         "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

}  // namespace mooring::controlplane::ui
