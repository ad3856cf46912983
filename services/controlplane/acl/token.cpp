#include "services/controlplane/acl/token.hpp"

#include <nlohmann/json.hpp>

#include "services/controlplane/acl/policy.hpp"

namespace mooring::controlplane::acl {

using nlohmann::json;

bool expired(const Token& t, domain::Time now) { return domain::is_set(t.expiration_time) && t.expiration_time <= now; }

domain::Expected<Token> parse_token_request(const json& body, domain::Time now) {
  if (!body.is_object()) return domain::error("token: expected a JSON object");
  Token t;
  if (body.contains("Name")) {
    if (!body["Name"].is_string()) return domain::error("token: Name: expected a string");
    t.name = body["Name"].get<std::string>();
    if (t.name.size() > 256) return domain::error("token: Name: longer than 256 characters");
  }
  const std::string who = "token " + json(t.name).dump();
  const auto type = body.value("Type", json("client"));
  if (type == "client")
    t.type = TokenType::client;
  else if (type == "management")
    t.type = TokenType::management;
  else
    return domain::error(who + ": Type: expected \"client\" or \"management\", got " + type.dump());
  if (body.contains("Policies") && !body["Policies"].is_null()) {
    if (!body["Policies"].is_array()) return domain::error(who + ": Policies: expected an array of policy names");
    for (const auto& p : body["Policies"]) {
      if (!p.is_string() || !valid_policy_name(p.get<std::string>()))
        return domain::error(who + ": Policies: not a policy name: " + p.dump());
      t.policies.push_back(p.get<std::string>());
    }
  }
  if (t.type == TokenType::client && t.policies.empty())
    return domain::error(who + ": Policies: a client token needs at least one policy");
  if (t.type == TokenType::management && !t.policies.empty())
    return domain::error(who + ": Policies: a management token takes none (it may do everything)");
  const bool ttl = body.contains("ExpirationTTL") && !body["ExpirationTTL"].is_null() && body["ExpirationTTL"] != "";
  const bool at = body.contains("ExpirationTime") && !body["ExpirationTime"].is_null() && body["ExpirationTime"] != "";
  if (ttl && at) return domain::error(who + ": give ExpirationTTL or ExpirationTime, not both");
  if (ttl) {
    const auto& v = body["ExpirationTTL"];
    auto d = v.is_string() ? domain::parse_duration(v.get<std::string>())
                           : domain::Expected<domain::Duration>(domain::error("not a string"));
    if (!d || d->count() <= 0)
      return domain::error(who + ": ExpirationTTL: expected a positive duration like \"1h\", got " + v.dump());
    t.expiration_time = now + *d;
  }
  if (at) {
    const auto& v = body["ExpirationTime"];
    auto when = v.is_string() ? domain::parse_time(v.get<std::string>())
                              : domain::Expected<domain::Time>(domain::error("not a string"));
    if (!when) return domain::error(who + ": ExpirationTime: expected an RFC 3339 time, got " + v.dump());
    if (*when <= now) return domain::error(who + ": ExpirationTime: " + v.dump() + " is in the past");
    t.expiration_time = *when;
  }
  t.create_time = now;
  return t;
}

json to_api_json(const Token& t, std::string_view secret_id) {
  json j{{"AccessorID", t.accessor_id},
         {"Name", t.name},
         {"Type", t.type == TokenType::management ? "management" : "client"},
         {"Policies", t.policies},
         {"CreateTime", domain::format_time(t.create_time)},
         {"ExpirationTime", domain::is_set(t.expiration_time) ? json(domain::format_time(t.expiration_time)) : json()},
         {"CreateIndex", t.create_index},
         {"ModifyIndex", t.modify_index}};
  if (!secret_id.empty()) j["SecretID"] = std::string(secret_id);
  return j;
}

std::string to_storage_text(const Token& t) {
  return json{{"AccessorID", t.accessor_id},
              {"SecretHash", t.secret_hash},
              {"Name", t.name},
              {"Type", t.type == TokenType::management ? "management" : "client"},
              {"Policies", t.policies},
              {"CreateTimeMs", domain::to_unix_ms(t.create_time)},
              {"ExpirationTimeMs", domain::to_unix_ms(t.expiration_time)},
              {"CreateIndex", t.create_index},
              {"ModifyIndex", t.modify_index}}
      .dump();
}

domain::Expected<Token> token_from_storage(const json& j) {
  try {
    Token t;
    t.accessor_id = j.at("AccessorID").get<std::string>();
    t.secret_hash = j.at("SecretHash").get<std::string>();
    t.name = j.at("Name").get<std::string>();
    t.type = j.at("Type") == "management" ? TokenType::management : TokenType::client;
    t.policies = j.at("Policies").get<std::vector<std::string>>();
    t.create_time = domain::from_unix_ms(j.at("CreateTimeMs").get<std::int64_t>());
    t.expiration_time = domain::from_unix_ms(j.value("ExpirationTimeMs", std::int64_t{0}));
    t.create_index = j.value("CreateIndex", std::uint64_t{0});
    t.modify_index = j.value("ModifyIndex", std::uint64_t{0});
    return t;
  } catch (const json::exception& e) {
    return domain::error(std::string("token: ") + e.what());
  }
}

}  // namespace mooring::controlplane::acl
