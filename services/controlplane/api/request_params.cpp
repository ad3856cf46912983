#include "services/controlplane/api/request_params.hpp"

#include <stdexcept>

#include "services/controlplane/api/endpoints.hpp"

namespace mooring::controlplane::api {

domain::Expected<StringMap> parse_secrets_header(std::string_view text) {
  StringMap out;
  std::size_t position = 0;
  while (!text.empty()) {
    ++position;
    auto comma = text.find(',');
    auto entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (entry.empty()) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return domain::error("entry " + std::to_string(position) + " is not key=value");
    out[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return out;
}

domain::Expected<StringMap> header_secrets(const http::Request& req) {
  StringMap out;
  for (auto [name, shown] : {std::pair{"x-nomad-csi-secrets", "X-Nomad-CSI-Secrets"},
                             std::pair{"x-mooring-csi-secrets", "X-Mooring-CSI-Secrets"}}) {
    auto h = req.header(name);
    if (h.empty()) continue;
    auto parsed = parse_secrets_header(h);
    if (!parsed) return domain::error(std::string("header ") + shown + ": " + parsed.error());
    for (auto& [k, v] : *parsed) out[k] = v;
  }
  return out;
}

bool page_params(const http::Request& req, volumes::PageRequest& page, http::Response& err) {
  if (auto pp = req.param("per_page")) {
    try {
      std::size_t used = 0;
      long n = std::stol(std::string(*pp), &used);
      if (used != pp->size() || n < 0 || n > 100000) throw std::invalid_argument("range");
      page.max_entries = static_cast<std::int32_t>(n);
    } catch (const std::exception&) {
      err = bad_request("query parameter \"per_page\": must be a non-negative integer, got \"" + std::string(*pp) + "\"");
      return false;
    }
  }
  page.token = std::string(req.param("next_token").value_or(""));
  return true;
}

bool required_param(const http::Request& req, std::string_view name, std::string& out, http::Response& err) {
  out = std::string(req.param(name).value_or(""));
  if (out.empty()) {
    err = bad_request("query parameter \"" + std::string(name) + "\" is required");
    return false;
  }
  return true;
}

}  // namespace mooring::controlplane::api
