// mooring: the command-line client for the control plane's REST API. Wiring only.
#include <cstdlib>
#include <iostream>

#include "cli/run.hpp"
#include "cli/settings.hpp"

int main(int argc, char** argv) {
  std::map<std::string, std::string> env;
  for (const auto& name : mooring::cli::environment_names())
    if (const char* value = std::getenv(name.c_str())) env[name] = value;
  int rc = mooring::cli::run(std::vector<std::string>(argv + 1, argv + argc), env, std::cout, std::cerr);
  std::cout.flush();
  return rc;
}
