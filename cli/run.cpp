#include "cli/run.hpp"

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "shared/domain/ids.hpp"

namespace mooring::cli {

int run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, std::ostream& out,
        std::ostream& err) {
  const auto& commands = all_commands();
  auto parsed = parse_command_line(args, commands);
  if (parsed.help) {
    out << usage_for(parsed.help_words, commands);
    return kExitOk;
  }
  if (!parsed.error.empty()) {
    err << "Error: " << parsed.error << "\n\n" << usage_for(parsed.help_words, commands);
    return kExitUsage;
  }
  const Invocation& inv = parsed.invocation;

  std::string address = inv.globals.address;
  if (address.empty()) {
    auto it = env.find("MOORING_ADDR");
    address = it != env.end() && !it->second.empty() ? it->second : kDefaultAddress;
  }
  auto endpoint = parse_address(address);
  if (!endpoint) {
    err << "Error: " << endpoint.error() << "\n";
    return kExitUsage;
  }
  std::map<std::string, std::string> secrets;
  std::string error;
  if (!parse_secrets(inv.globals.secrets, secrets, error)) {
    err << "Error: " << error << "\n";
    return kExitUsage;
  }
  auto setting = [&](const std::string& given, const char* variable) {
    if (!given.empty()) return given;
    auto it = env.find(variable);
    return it != env.end() ? it->second : std::string{};
  };
  TlsClientFiles tls{.ca_file = setting(inv.globals.ca_cert, "MOORING_CACERT"),
                     .cert_file = setting(inv.globals.client_cert, "MOORING_CLIENT_CERT"),
                     .key_file = setting(inv.globals.client_key, "MOORING_CLIENT_KEY")};
  GlobalOptions globals = inv.globals;
  globals.token = setting(inv.globals.token, "MOORING_TOKEN");
  globals.ns = setting(inv.globals.ns, "MOORING_NAMESPACE");
  if (!globals.ns.empty() && globals.ns != "*")
    if (auto st = domain::validate_namespace(globals.ns); !st) {
      err << "Error: -namespace: " << st.error() << "\n";
      return kExitUsage;
    }
  Context ctx(HttpClient(std::move(*endpoint), std::move(tls)), std::move(globals), std::move(secrets), out, err);
  return inv.command->run(ctx, inv);
}

}  // namespace mooring::cli
