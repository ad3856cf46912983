// Domain: sizes as people write them, parsed once for the tools of the orchestrator (the CLI's
// `volume expand`, a namespace quota). mooring-hostpath keeps its own: the plugin stands apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mooring::domain {

// Bytes from "1073741824", "10G" (1000^3), "10Gi" or "10GiB" (1024^3), "1.5Gi", "2 GiB"; K/M/G/T
// and Ki/Mi/Gi/Ti, an optional trailing "B". Whole numbers are exact to the byte; a fraction is
// rounded to the nearest byte. nullopt for anything else: no number, a negative number, an unknown
// unit, or more than an int64 holds.
std::optional<std::int64_t> parse_size(std::string_view text);

}  // namespace mooring::domain
