#include "cli/run.hpp"

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/settings.hpp"
#include "shared/domain/ids.hpp"

namespace mooring::cli {

int run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, std::ostream& out,
        std::ostream& err) {
  const auto& commands = all_commands();
  if (args.size() == 1 && (args[0] == "--help-markdown" || args[0] == "-help-markdown")) {
    out << cli_reference_markdown();
    return kExitOk;
  }
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

  GlobalOptions globals = inv.globals;
  // Where the address came from, so a connection error can say what to change.
  const AddressOrigin origin = !globals.address.empty() ? AddressOrigin::flag
                               : env.contains("MOORING_ADDR") && !env.at("MOORING_ADDR").empty()
                                   ? AddressOrigin::environment
                                   : AddressOrigin::fallback;
  apply_environment(globals, env);
  if (globals.address.empty()) globals.address = kDefaultAddress;
  auto endpoint = parse_address(globals.address);
  if (!endpoint) {
    err << "Error: " << endpoint.error() << "\n";
    return kExitUsage;
  }
  endpoint->origin = origin;
  std::map<std::string, std::string> secrets;
  std::string error;
  if (!parse_secrets(globals.secrets, secrets, error)) {
    err << "Error: " << error << "\n";
    return kExitUsage;
  }
  TlsClientFiles tls{.ca_file = globals.ca_cert, .cert_file = globals.client_cert, .key_file = globals.client_key};
  if (!globals.ns.empty() && globals.ns != "*")
    if (auto st = domain::validate_namespace(globals.ns); !st) {
      err << "Error: -namespace: " << st.error() << "\n";
      return kExitUsage;
    }
  Context ctx(HttpClient(std::move(*endpoint), std::move(tls)), std::move(globals), std::move(secrets), out, err);
  return inv.command->run(ctx, inv);
}

}  // namespace mooring::cli
