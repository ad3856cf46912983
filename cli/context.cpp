#include "cli/context.hpp"

namespace mooring::cli {

namespace {

// The API's {"Error": "..."} message, else a short excerpt of whatever came back.
std::string error_text(const HttpResponse& res) {
  try {
    auto j = nlohmann::json::parse(res.body);
    if (j.is_object() && j.contains("Error") && j["Error"].is_string()) return j["Error"].get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  std::string excerpt = res.body.substr(0, 200);
  while (!excerpt.empty() && (excerpt.back() == '\n' || excerpt.back() == '\r')) excerpt.pop_back();
  return excerpt.empty() ? "(no message)" : excerpt;
}

std::uint64_t parse_index(const std::string& text) {
  try {
    return text.empty() ? 0 : std::stoull(text);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

HttpRequest Context::request(const std::string& method, const std::string& target) const {
  HttpRequest req;
  req.method = method;
  req.target = target;
  // Every call names the namespace when one was chosen; routes without one ignore it.
  if (!globals_.ns.empty() && target.find("namespace=") == std::string::npos)
    req.target += (target.find('?') == std::string::npos ? "?namespace=" : "&namespace=") + globals_.ns;
  if (!globals_.token.empty()) req.headers.emplace_back(kTokenHeader, globals_.token);
  return req;
}

std::string Context::http_error(const HttpResponse& res, const std::string& method, const std::string& target) const {
  const std::string where = " (HTTP " + std::to_string(res.status) + " from " + method + " " + target + ")";
  // The API names its header; a CLI user sets a variable. Other 401s (an introduction token used
  // or expired) keep the API's reason: no ACL token would help there.
  if (res.status == 401 && globals_.token.empty() && error_text(res).starts_with("ACL token required"))
    return "the control plane wants an ACL token: set MOORING_TOKEN (or -token) to a token's Secret ID (make run: "
           "export MOORING_TOKEN=$(cat .mooring/bootstrap-token))" +
           where;
  // Only when a token was given: without one, the 401 is about another credential (a used or
  // expired introduction token) and blaming an ACL token would send the user the wrong way.
  if (res.status == 401 && !globals_.token.empty())
    return "the ACL token given (MOORING_TOKEN or -token) was refused: " + error_text(res) + where;
  return error_text(res) + where;
}

std::variant<ApiReply, CallFailure> Context::attempt(const std::string& method, const std::string& target,
                                                     const std::optional<nlohmann::json>& body, CallOptions options) {
  HttpRequest req = request(method, target);
  req.timeout = options.timeout;
  if (body) req.body = body->dump();
  if (options.send_secrets && !secrets_.empty()) {
    std::string value;
    for (const auto& [k, v] : secrets_) value += (value.empty() ? "" : ",") + k + "=" + v;
    req.headers.emplace_back(kSecretsHeader, value);
  }
  auto res = client_.send(req);
  if (!res) return CallFailure{0, res.error()};
  if (res->status >= 400) return CallFailure{res->status, http_error(*res, method, target)};
  ApiReply reply;
  reply.index = parse_index(res->header("x-mooring-index"));
  if (!res->body.empty()) {
    try {
      reply.body = nlohmann::json::parse(res->body);
    } catch (const nlohmann::json::parse_error&) {
      return CallFailure{res->status, "the control plane at " + address() + " answered " + method + " " + target +
                                          " with something that is not JSON"};
    }
  }
  return reply;
}

std::optional<ApiReply> Context::call(const std::string& method, const std::string& target,
                                      const std::optional<nlohmann::json>& body, CallOptions options,
                                      std::string* error_message) {
  auto result = attempt(method, target, body, options);
  if (auto* reply = std::get_if<ApiReply>(&result)) return std::move(*reply);
  const auto& message = std::get<CallFailure>(result).message;
  if (error_message) *error_message = message;
  if (!options.quiet) fail(message);
  return std::nullopt;
}

int Context::stream_lines(const std::string& target, const std::function<void(std::string_view)>& on_line,
                          std::chrono::milliseconds silence) {
  HttpRequest req = request("GET", target);
  req.timeout = silence;
  std::string pending;
  req.on_body = [&](std::string_view piece) {
    pending.append(piece);
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      on_line(std::string_view(pending).substr(0, nl));
      pending.erase(0, nl + 1);
    }
    return true;
  };
  auto res = client_.send_once(req);
  if (!res) return fail(res.error());
  if (res->status >= 400) return fail(http_error(*res, "GET", target));
  return kExitOk;
}

void Context::print_json(const nlohmann::json& value) {
  out_ << value.dump(4, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int Context::fail(const std::string& message) {
  err_ << "Error: " << message << "\n";
  return kExitError;
}

}  // namespace mooring::cli
