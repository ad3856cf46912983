#include "cli/json_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

namespace mooring::cli {

domain::Expected<nlohmann::json> read_json_file(const std::string& path) {
  std::string content;
  if (path == "-") {
    content.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return domain::error("cannot read " + path + ": " + std::strerror(errno));
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string name = path == "-" ? "standard input" : path;
  try {
    return nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() carries "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    std::string what = e.what();
    auto at = what.find("] ");
    return domain::error(name + " is not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
}

}  // namespace mooring::cli
