// UI room: the web dashboard's static files (ui/web/), embedded in the binary at build time by
// cmake/embed_files.cmake, and how each is served. Only the endpoint that serves /ui/ includes this.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::controlplane::ui {

struct EmbeddedFile {
  std::string_view path;  // relative to ui/web: "index.html", "js/app.js"
  std::string_view body;
};

// Every embedded file (generated).
const std::vector<EmbeddedFile>& embedded_files();

struct Asset {
  std::string_view body;
  std::string_view content_type;
};

// The file at `path` (relative to /ui/; "" is index.html), or nullopt. Paths are compared as
// they are: nothing is read from disk, so "../" can only fail to match.
std::optional<Asset> find_asset(std::string_view path);

// The Content-Security-Policy the dashboard is served with: scripts, styles and connections to
// this origin only, no inline code, no frames, no plugins.
std::string_view content_security_policy();

}  // namespace mooring::controlplane::ui
