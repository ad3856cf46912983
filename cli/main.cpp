// mooring: the command-line client for the control plane's REST API. Wiring only.
#include <cstdlib>
#include <iostream>

#include "cli/run.hpp"

int main(int argc, char** argv) {
  std::map<std::string, std::string> env;
  if (const char* addr = std::getenv("MOORING_ADDR")) env["MOORING_ADDR"] = addr;
  int rc = mooring::cli::run(std::vector<std::string>(argv + 1, argv + argc), env, std::cout, std::cerr);
  std::cout.flush();
  return rc;
}
