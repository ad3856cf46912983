// The web dashboard's files (GET /ui/, /ui/:file), served from the binary (ui/assets.hpp) with a
// strict Content-Security-Policy, and the REST API's contract (GET /v1/openapi.json). Neither
// holds data: the dashboard calls the REST API with the operator's token, so these routes need
// no capability.
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/openapi_document.hpp"
#include "services/controlplane/ui/assets.hpp"

namespace mooring::controlplane::api {

namespace {

http::Response redirect_to_ui() {
  http::Response res;
  res.status = 301;
  res.content_type = "text/plain; charset=utf-8";
  res.body = "the dashboard is at /ui/\n";
  res.set_header("Location", "/ui/");
  return res;
}

}  // namespace

http::Response serve_ui(Context&, const http::Request& req) {
  // "/ui" without the slash: relative links would resolve against "/".
  if (req.path == "/" || req.path == "/ui") return redirect_to_ui();
  auto it = req.params.find("file");
  const std::string_view file = it == req.params.end() ? std::string_view{} : std::string_view{it->second};
  auto asset = ui::find_asset(file);
  if (!asset) return http::error_response(404, "no such dashboard file: " + std::string(file));
  http::Response res;
  res.body = std::string(asset->body);
  res.content_type = std::string(asset->content_type);
  res.set_header("Content-Security-Policy", std::string(ui::content_security_policy()));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  // Served from the binary: a new build must be picked up at once, so browsers revalidate.
  res.set_header("Cache-Control", "no-cache");
  return res;
}

// The contract is public and holds no data, as the dashboard's files: served to anyone, before
// the state is loaded too, so a client generator or a dashboard can read it at any time.
http::Response serve_openapi(Context&, const http::Request&) {
  http::Response res;
  res.body = std::string(openapi_document());
  res.content_type = "application/json";
  res.set_header("X-Content-Type-Options", "nosniff");
  return res;
}

}  // namespace mooring::controlplane::api
