// CLI room: reading the JSON files commands take (volume and allocation specs). "-" is stdin.
// Comments (// and /* */) are allowed: `mooring volume init` writes its examples with them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "shared/domain/result.hpp"

namespace mooring::cli {

// The parsed document, or an error naming the file (missing, unreadable, not JSON with line/column).
domain::Expected<nlohmann::json> read_json_file(const std::string& path);

}  // namespace mooring::cli
