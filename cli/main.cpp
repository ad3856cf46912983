// mooring: the command-line client for the control plane's REST API. Wiring only.
#include <cstdlib>
#include <iostream>

#include "cli/run.hpp"

int main(int argc, char** argv) {
  std::map<std::string, std::string> env;
  for (const char* name : {"MOORING_ADDR", "MOORING_CACERT", "MOORING_CLIENT_CERT", "MOORING_CLIENT_KEY", "MOORING_TOKEN",
                           "MOORING_NAMESPACE"})
    if (const char* value = std::getenv(name)) env[name] = value;
  int rc = mooring::cli::run(std::vector<std::string>(argv + 1, argv + argc), env, std::cout, std::cerr);
  std::cout.flush();
  return rc;
}
