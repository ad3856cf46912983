// HTTP room: parsing of request targets — percent-decoding, query strings and Go-style durations
// ("10s", "1m30s", "250ms") as Nomad's blocking queries use them. Pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane::http {

// Decodes %XX escapes; `plus_is_space` for query components. nullopt on a malformed escape or
// a decoded NUL byte (never a legitimate id or parameter, and dangerous in paths).
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

// Splits "a=1&b=x%20y" into decoded pairs, in order, repeats kept. nullopt when any component
// is malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_query_pairs(std::string_view query);
// The same as a map (a repeated key keeps its last value).
std::optional<QueryParams> parse_query(std::string_view query);
// Every value of a repeated parameter of a request-target ("?topic=A&topic=B"), in order; empty
// when there is none or the query is malformed (parse_query refuses it first).
std::vector<std::string> query_values(std::string_view target, std::string_view name);

// Splits a request-target into (path, query) at the first '?'.
std::pair<std::string_view, std::string_view> split_target(std::string_view target);

// Go duration syntax: a sequence of <number><unit> with units ns, us, ms, s, m, h; a bare number
// means seconds (Nomad accepts "wait=10" too). nullopt for anything else or a negative value.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// Formats a duration the way parse_duration reads it ("1m30s", "250ms", "0s").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace mooring::controlplane::http
