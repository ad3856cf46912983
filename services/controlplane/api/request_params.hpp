// API room: request parts the endpoints share — text that must be UTF-8, plugin secrets from the
// header `X-Mooring-CSI-Secrets: k=v,k2=v2` (or Nomad's `X-Nomad-CSI-Secrets`; passed to the
// plugin, never logged or returned), paging of plugin listings, required query parameters.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "services/controlplane/http/message.hpp"
#include "services/controlplane/volumes/results.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::api {

using StringMap = std::map<std::string, std::string>;

// "k=v,k2=v2" -> map. Values may contain '='; empty entries are skipped. The error names the
// malformed entry's position (never its value: it is a secret).
domain::Expected<StringMap> parse_secrets_header(std::string_view text);
// Both headers merged (the Mooring one wins); the error names the header.
domain::Expected<StringMap> header_secrets(const http::Request& req);
// ?per_page=N&next_token=T; on failure `err` is the 400 to return.
bool page_params(const http::Request& req, volumes::PageRequest& page, http::Response& err);
// The namespace a request names: ?namespace=, else the "Namespace" its JSON body gives (the
// object's own, or its items' one level down: {"Volumes":[...]}, {"Allocation":{...}}), else
// "default". One request acts in one namespace, the one its ACL check used: a body naming
// another (or two) is refused, as is "*" where `any` is false. Errors name the parameter or field.
domain::Expected<std::string> resolve_namespace(const http::Request& req, bool any);
bool required_param(const http::Request& req, std::string_view name, std::string& out, http::Response& err);
// Decoded query parameters or path parameters that are not valid UTF-8 (every answer, log line
// and plugin call that quotes them needs it): the 400's message naming the first, or nullopt.
std::optional<std::string> invalid_query_text(const http::QueryParams& query);
std::optional<std::string> invalid_path_text(const http::PathParams& params);

}  // namespace mooring::controlplane::api
