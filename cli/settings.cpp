#include "cli/settings.hpp"

#include <algorithm>
#include <sstream>

namespace mooring::cli {

namespace {

using Doc = config::Doc;

// Wraps `text` to `width` columns, continuation lines indented by `indent` spaces.
std::string wrap(const std::string& text, std::size_t indent, std::size_t width) {
  std::istringstream words(text);
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

}  // namespace

const std::vector<GlobalSetting>& global_settings() {
  static const std::vector<GlobalSetting> settings{
      {Doc{"address", "MOORING_ADDR", "", "URL",
           "the control plane's REST API: https://HOST:PORT or http://HOST:PORT; make run serves https",
           "http://127.0.0.1:4700"},
       &GlobalOptions::address},
      {Doc{"ca-cert", "MOORING_CACERT", "", "FILE",
           "CA certificate that signed the control plane's HTTPS certificate; make run's is .mooring/tls/ca.pem",
           "the system's CAs"},
       &GlobalOptions::ca_cert},
      {Doc{"client-cert", "MOORING_CLIENT_CERT", "", "FILE",
           "client certificate for HTTPS, with -client-key, for a control plane started with "
           "--http-client-ca-file",
           ""},
       &GlobalOptions::client_cert},
      {Doc{"client-key", "MOORING_CLIENT_KEY", "", "FILE", "the key of -client-cert", ""}, &GlobalOptions::client_key},
      {Doc{"token", "MOORING_TOKEN", "", "SECRET",
           "ACL token (its Secret ID), sent as X-Mooring-Token; make run's management token is in "
           ".mooring/bootstrap-token",
           ""},
       &GlobalOptions::token},
      {Doc{"namespace", "MOORING_NAMESPACE", "", "NS",
           "namespace of the volumes and allocations acted on; * lists every one the token may read", "default"},
       &GlobalOptions::ns},
      {Doc{"json", "", "", "", "print the API's JSON instead of tables", ""}, nullptr},
      {Doc{"secrets", "", "", "k=v,...",
           "CSI secrets for create, delete and snapshot calls, sent as X-Mooring-CSI-Secrets and never printed", ""},
       &GlobalOptions::secrets},
  };
  return settings;
}

const GlobalSetting* find_global(const std::string& name) {
  for (const auto& s : global_settings())
    if (s.doc.flag == name) return &s;
  return nullptr;
}

void apply_environment(GlobalOptions& globals, const std::map<std::string, std::string>& env) {
  for (const auto& s : global_settings()) {
    if (!s.field || s.doc.env.empty() || !(globals.*s.field).empty()) continue;
    if (auto it = env.find(std::string(s.doc.env)); it != env.end()) globals.*s.field = it->second;
  }
}

std::vector<std::string> environment_names() {
  std::vector<std::string> names;
  for (const auto& s : global_settings())
    if (!s.doc.env.empty()) names.emplace_back(s.doc.env);
  return names;
}

std::string global_flags_usage() {
  auto left = [](const Doc& d) {
    return std::string("-").append(d.flag) + (d.value_name.empty() ? "" : std::string(" ").append(d.value_name));
  };
  std::size_t width = 2;  // "-h"
  for (const auto& s : global_settings()) width = std::max(width, left(s.doc).size());
  std::string out = "Global flags:\n";
  for (const auto& s : global_settings()) {
    std::string help(s.doc.help);
    std::string more;
    if (!s.doc.env.empty()) more = "env " + std::string(s.doc.env);
    if (!s.doc.default_value.empty())
      more += (more.empty() ? "" : "; ") + ("default: " + std::string(s.doc.default_value));
    if (!more.empty()) help += " (" + more + ")";
    const std::string l = left(s.doc);
    out += "  " + l + std::string(width + 2 - l.size(), ' ') + wrap(help, width + 4, 100) + "\n";
  }
  return out + "  -h" + std::string(width, ' ') + "help for any command\n";
}

std::string cli_reference_markdown() {
  std::vector<Doc> docs;
  for (const auto& s : global_settings()) docs.push_back(s.doc);
  return config::markdown_page(
      {.title = "mooring (the CLI)",
       .generated_by = "mooring --help-markdown",
       .intro = "The `mooring` command-line client takes these global flags before or after the command words\n"
                "(`mooring -json volume status` and `mooring volume status -json` are the same; `--json` works\n"
                "too). A flag given on the command line wins over its environment variable. `mooring -h` lists\n"
                "the commands, `mooring COMMAND -h` a command's own flags; `mooring completion bash|zsh` prints\n"
                "a completion script. `make run` prints the `export` line that puts `mooring` on `PATH` and sets\n"
                "the variables for its stack. The commands: [cli.md](../cli.md).",
       .flag_prefix = "-"},
      docs);
}

}  // namespace mooring::cli
