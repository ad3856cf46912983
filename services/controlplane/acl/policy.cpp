#include "services/controlplane/acl/policy.hpp"

#include <nlohmann/json.hpp>

namespace mooring::controlplane::acl {

namespace {

using nlohmann::json;

struct Invalid {
  std::string message;
};

std::string q(std::string_view s) { return json(std::string(s)).dump(); }

const std::set<std::string_view> kRuleKeys{"Namespace", "Plugin", "Node", "Operator"};
const std::set<std::string_view> kNamespaceKeys{"Policy", "Capabilities"};

NamespaceRule parse_namespace_rule(const json& j, const std::string& where) {
  if (!j.is_object()) throw Invalid{where + ": expected an object, got " + j.dump()};
  NamespaceRule r;
  for (const auto& [key, value] : j.items())
    if (!kNamespaceKeys.contains(key)) throw Invalid{where + ": unknown field " + q(key) + " (Policy, Capabilities)"};
  if (j.contains("Policy")) {
    const auto& p = j["Policy"];
    if (!p.is_string() || (p != "read" && p != "write" && p != "deny"))
      throw Invalid{where + ".Policy: expected \"read\", \"write\" or \"deny\", got " + p.dump()};
    r.policy = p.get<std::string>();
  }
  if (j.contains("Capabilities")) {
    const auto& caps = j["Capabilities"];
    if (!caps.is_array()) throw Invalid{where + ".Capabilities: expected an array of strings, got " + caps.dump()};
    for (const auto& c : caps) {
      auto cap = c.is_string() ? parse_capability(c.get<std::string>()) : std::nullopt;
      if (!cap)
        throw Invalid{where + ".Capabilities: unknown capability " + c.dump() +
                      " (csi-list-volume, csi-read-volume, csi-write-volume, csi-mount-volume, list-allocs, "
                      "read-alloc, submit-alloc, alloc-lifecycle)"};
      r.capabilities.insert(*cap);
    }
  }
  if (!r.policy && !j.contains("Capabilities")) throw Invalid{where + ": needs a Policy or Capabilities"};
  return r;
}

AreaRule parse_area(const json& j, const std::string& where, std::initializer_list<Level> allowed) {
  std::string names;
  for (auto l : allowed) names.append("\"").append(to_string(l)).append("\", ");
  names += "or \"deny\"";
  if (j.is_string()) {
    const auto text = j.get<std::string>();
    if (text == "deny") return {Level::none, true};
    for (auto l : allowed)
      if (text == to_string(l)) return {l, false};
  }
  throw Invalid{where + ": expected " + names + ", got " + j.dump()};
}

std::string area_text(const AreaRule& r) { return r.deny ? "deny" : std::string(to_string(r.level)); }

}  // namespace

std::set<Capability> granted(const NamespaceRule& r) {
  std::set<Capability> out = r.capabilities;
  if (r.policy == "read" || r.policy == "write") {
    for (auto c :
         {Capability::csi_list_volume, Capability::csi_read_volume, Capability::list_allocs, Capability::read_alloc})
      out.insert(c);
  }
  if (r.policy == "write") out.insert(kAllCapabilities.begin(), kAllCapabilities.end());
  return out;
}

bool denies(const NamespaceRule& r) { return r.policy == "deny"; }

bool valid_policy_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '-' && c != '_') return false;
  return true;
}

domain::Expected<Policy> parse_policy(const json& body, std::string_view name) {
  const std::string who = "policy " + q(name);
  try {
    if (!valid_policy_name(name)) throw Invalid{who + ": Name: must be 1 to 128 letters, digits, '-' or '_'"};
    if (!body.is_object()) throw Invalid{who + ": expected a JSON object"};
    Policy p;
    p.name = std::string(name);
    if (body.contains("Name") && body["Name"] != p.name)
      throw Invalid{who + ": Name: " + body["Name"].dump() + " does not match the name in the path"};
    if (body.contains("Description")) {
      if (!body["Description"].is_string()) throw Invalid{who + ": Description: expected a string"};
      p.description = body["Description"].get<std::string>();
    }
    if (!body.contains("Rules") || !body["Rules"].is_object()) throw Invalid{who + ": Rules: expected an object"};
    const auto& rules = body["Rules"];
    for (const auto& [key, value] : rules.items())
      if (!kRuleKeys.contains(key))
        throw Invalid{who + ": Rules: unknown field " + q(key) + " (Namespace, Plugin, Node, Operator)"};
    if (rules.contains("Namespace")) {
      const auto& ns = rules["Namespace"];
      if (!ns.is_object()) throw Invalid{who + ": Rules.Namespace: expected an object of namespace rules"};
      for (const auto& [pattern, rule] : ns.items()) {
        const std::string where = who + ": Rules.Namespace." + q(pattern);
        if (pattern.empty()) throw Invalid{who + ": Rules.Namespace: a namespace name must not be empty"};
        p.namespaces[pattern] = parse_namespace_rule(rule, where);
      }
    }
    if (rules.contains("Plugin"))
      p.plugin = parse_area(rules["Plugin"], who + ": Rules.Plugin", {Level::read, Level::list, Level::write});
    if (rules.contains("Node")) p.node = parse_area(rules["Node"], who + ": Rules.Node", {Level::read, Level::write});
    if (rules.contains("Operator"))
      p.operator_ = parse_area(rules["Operator"], who + ": Rules.Operator", {Level::read, Level::write});
    return p;
  } catch (const Invalid& e) {
    return domain::error(e.message);
  }
}

json to_json(const Policy& p) {
  json ns = json::object();
  for (const auto& [pattern, r] : p.namespaces) {
    json rule = json::object();
    if (r.policy) rule["Policy"] = *r.policy;
    if (!r.capabilities.empty() || !r.policy) {
      json caps = json::array();
      for (auto c : r.capabilities) caps.push_back(std::string(to_string(c)));
      rule["Capabilities"] = caps;
    }
    ns[pattern] = rule;
  }
  json rules = json::object();
  if (!p.namespaces.empty()) rules["Namespace"] = ns;
  if (p.plugin) rules["Plugin"] = area_text(*p.plugin);
  if (p.node) rules["Node"] = area_text(*p.node);
  if (p.operator_) rules["Operator"] = area_text(*p.operator_);
  return json{{"Name", p.name},
              {"Description", p.description},
              {"Rules", rules},
              {"CreateIndex", p.create_index},
              {"ModifyIndex", p.modify_index}};
}

domain::Expected<Policy> policy_from_storage(const json& j) {
  if (!j.is_object() || !j.contains("Name") || !j["Name"].is_string()) return domain::error("policy: no Name");
  auto p = parse_policy(j, j["Name"].get<std::string>());
  if (!p) return p;
  p->create_index = j.value("CreateIndex", std::uint64_t{0});
  p->modify_index = j.value("ModifyIndex", std::uint64_t{0});
  return p;
}

}  // namespace mooring::controlplane::acl
