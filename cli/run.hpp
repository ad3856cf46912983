// CLI room: the whole program as a function — parse, pick the address (-address, then
// MOORING_ADDR, then the default), run the command, return the exit code (0 ok, 1 error,
// 2 usage). main.cpp only passes argv, the environment and the standard streams.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace mooring::cli {

inline constexpr const char* kDefaultAddress = "http://127.0.0.1:4700";

// `args` excludes argv[0]; `env` holds the variables the CLI reads (MOORING_ADDR).
int run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, std::ostream& out,
        std::ostream& err);

}  // namespace mooring::cli
