#include "services/controlplane/api/request_params.hpp"

#include <optional>
#include <set>
#include <stdexcept>

#include "services/controlplane/api/endpoints.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

namespace {

// Every "Namespace" string the body names, at the top or one level down.
void body_namespaces(const nlohmann::json& body, std::set<std::string>& out) {
  auto take = [&](const nlohmann::json& obj) {
    if (!obj.is_object()) return;
    if (auto it = obj.find("Namespace"); it != obj.end() && it->is_string()) out.insert(it->get<std::string>());
  };
  take(body);
  if (!body.is_object()) return;
  for (const auto& [key, value] : body.items()) {
    take(value);
    if (value.is_array())
      for (const auto& item : value) take(item);
  }
}

}  // namespace

domain::Expected<std::string> resolve_namespace(const http::Request& req, bool any) {
  std::optional<std::string> ns;
  if (auto q = req.param("namespace")) {
    ns = std::string(*q);
    if (*ns == kAnyNamespace) {
      if (!any)
        return domain::error("query parameter \"namespace\": \"*\" lists every namespace; it names none to act in");
    } else if (auto st = domain::validate_namespace(*ns); !st) {
      return domain::error("query parameter \"namespace\": " + st.error());
    }
  }
  // Only a body that says "Namespace" is parsed here; the endpoint reads it again as usual.
  if (!req.body.empty() && req.body.find("\"Namespace\"") != std::string::npos) {
    std::set<std::string> named;
    body_namespaces(nlohmann::json::parse(req.body, nullptr, false), named);
    if (named.size() > 1)
      return domain::error("field \"Namespace\": one request acts in one namespace, the body names " +
                           std::to_string(named.size()));
    if (named.size() == 1) {
      const auto& body_ns = *named.begin();
      if (auto st = domain::validate_namespace(body_ns); !st)
        return domain::error("field \"Namespace\": " + st.error());
      if (ns && *ns != body_ns)
        return domain::error("field \"Namespace\": \"" + body_ns +
                             "\" does not match the query parameter namespace=" + *ns);
      ns = body_ns;
    }
  }
  return ns.value_or(std::string(domain::kDefaultNamespace));
}

std::optional<std::string> invalid_query_text(const http::QueryParams& query) {
  for (const auto& [name, value] : query) {
    if (!domain::valid_utf8(name)) return "a query parameter's name is not valid UTF-8";
    if (!domain::valid_utf8(value)) return "query parameter " + domain::in_quotes(name) + ": not valid UTF-8";
  }
  return std::nullopt;
}

std::optional<std::string> invalid_path_text(const http::PathParams& params) {
  for (const auto& [name, value] : params)
    if (!domain::valid_utf8(value)) return "path parameter " + domain::in_quotes(name) + ": not valid UTF-8";
  return std::nullopt;
}

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
    // Secrets travel to the plugin as protobuf strings, which must be UTF-8.
    if (!domain::valid_utf8(entry)) return domain::error("entry " + std::to_string(position) + " is not valid UTF-8");
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
      err =
          bad_request("query parameter \"per_page\": must be a non-negative integer, got \"" + std::string(*pp) + "\"");
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
