// mooring-controlplane: parses the configuration, sets up logging and the process, and runs the
// control plane (control_plane.hpp owns the wiring) until SIGINT/SIGTERM stops it gracefully.
#include <cstdlib>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "services/controlplane/claims/fault_switch.hpp"
#include "services/controlplane/config/controlplane_config.hpp"
#include "services/controlplane/control_plane.hpp"
#include "services/controlplane/control_plane_setup.hpp"
#include "shared/config/settings.hpp"
#include "shared/log/async_writer.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/families.hpp"
#include "shared/process/process_hygiene.hpp"

using namespace mooring;
using namespace mooring::controlplane;

int main(int argc, char** argv) {
  // Output goes to pipes (run-local's tee, a log collector): a reader that died first (Ctrl-C
  // reaches tee too) must not kill the control plane by SIGPIPE before its shutdown runs.
  process::survive_closed_pipes();
  process::skip_mutex_deadlock_detection();  // Debian's debug Abseil: ~5 % of CPU with 1000 agents
  // gRPC resolves names (etcd endpoints, agents' addresses) with getaddrinfo, as everything else
  // on the host does (/etc/hosts, nsswitch; Kubernetes' cluster DNS through resolv.conf). Its
  // c-ares resolver also leaked at exit under the sanitizers here. A user's own choice stands.
  ::setenv("GRPC_DNS_RESOLVER", "native", 0);
  auto parsed =
      parse_controlplane_config(std::vector<std::string>(argv, argv + argc), config::environment("MOORING_CP_"));
  if (const auto* error = std::get_if<ControlPlaneConfigError>(&parsed)) {
    std::cerr << "mooring-controlplane: " << error->message << "\n";
    return 2;
  }
  const auto& args = std::get<ControlPlaneArgs>(parsed);
  if (args.help || args.help_markdown) {
    std::cout << (args.help ? controlplane_config_help() : controlplane_config_markdown());
    return 0;
  }
  if (auto refusal = fault_switch_refusal()) {
    std::cerr << "mooring-controlplane: " << *refusal << "\n";
    return 2;
  }
  const ControlPlaneConfig& flags = args.config;
  log::configure(flags.log_level, flags.log_format);
  // Lines are written by a thread of their own, not by the io_context thread (issue 21).
  // Destroyed last, after writing every queued line.
  log::AsyncWriter log_writer;
  raise_open_file_limit(log::Logger{"controlplane"});
  // Before anything that records is built: each component takes its handles when constructed.
  if (flags.metrics) metrics::enable(metrics::Service::controlplane);
  ControlPlane control_plane{flags, argv};
  return control_plane.run();
}
