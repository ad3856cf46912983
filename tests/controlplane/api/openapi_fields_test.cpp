// The contract's object schemas name exactly the fields the JSON field tables write
// (shared/domain/json/): a domain type's full answer, its list stub and its API input, key for key.
// An answer validated by openapi_answers shows only the fields it happened to carry; this catches a
// field the walk never saw (one omitted while unset) and a table row the document forgot.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "services/controlplane/api/openapi_document.hpp"
#include "shared/domain/json/fields.hpp"

namespace mooring::domain {
namespace {

using nlohmann::json;

// The keys a type's table writes (or takes) where `bit` is set.
template <class T>
std::set<std::string> table_keys(unsigned bit) {
  std::set<std::string> out;
  for (const auto& f : codec::fields_of(std::type_identity<T>{}))
    if ((f.where & bit) != 0) out.insert(std::string(f.key));
  return out;
}

// The difference between a schema's properties and a table's keys; "" when they agree.
std::string differs(const json& doc, const std::string& schema, const std::set<std::string>& keys,
                    const std::set<std::string>& added_by_endpoint = {}) {
  const auto& schemas = doc["components"]["schemas"];
  if (!schemas.contains(schema)) return "components/schemas/" + schema + " is missing";
  std::set<std::string> documented;
  for (const auto& [name, _] : schemas[schema]["properties"].items()) documented.insert(name);
  std::string out;
  for (const auto& k : keys)
    if (!documented.contains(k)) out += schema + ": the field table writes \"" + k + "\", the schema lacks it\n";
  for (const auto& k : documented)
    if (!keys.contains(k) && !added_by_endpoint.contains(k))
      out += schema + ": the schema has \"" + k + "\", the field table has no such field\n";
  return out;
}

struct Case {
  std::string schema;
  std::set<std::string> keys;
  std::set<std::string> added_by_endpoint;
};

// Every schema that mirrors a field table. What an endpoint adds to the table's object is named.
std::vector<Case> cases() {
  using codec::kApi;
  using codec::kInput;
  using codec::kStub;
  return {
      {"Volume", table_keys<Volume>(kApi), {}},
      {"VolumeStub", table_keys<Volume>(kStub), {}},
      {"VolumeInput", table_keys<Volume>(kInput), {}},
      {"Claim", table_keys<Claim>(kApi), {}},
      // GET /v1/volumes/claims adds the claim's id, volume and release step (claim_endpoints.cpp).
      {"ClaimObject",
       table_keys<Claim>(kApi),
       {"ID", "Namespace", "VolumeID", "PluginID", "ReleaseStep", "ReleaseReason"}},
      {"VolumeCapability", table_keys<VolumeCapability>(kApi), {}},
      {"MountOptions", table_keys<MountOptions>(kApi), {}},
      {"Topology", table_keys<Topology>(kApi), {}},
      {"TopologyRequest", table_keys<TopologyRequest>(kApi), {}},
      {"VolumeUsage", table_keys<VolumeUsage>(kApi), {}},
      {"VolumeCondition", table_keys<VolumeCondition>(kApi), {}},
      {"VolumeOwnership", table_keys<VolumeOwnership>(kApi), {}},
      {"VolumeModification", table_keys<VolumeModification>(kApi), {}},
      {"Plugin", table_keys<Plugin>(kApi), {}},
      {"PluginStub", table_keys<Plugin>(kStub), {}},
      {"PluginInstance", table_keys<PluginInstance>(kApi), {}},
      {"ControllerInfo", table_keys<ControllerInfo>(kApi), {}},
      {"NodeInfo", table_keys<NodeInfo>(kApi), {}},
      {"Node", table_keys<Node>(kApi), {}},
      {"NodeStub", table_keys<Node>(kStub), {}},
      {"NodeEvent", table_keys<NodeEvent>(kApi), {}},
      {"NodeIdentity", table_keys<NodeIdentity>(kApi), {}},
      {"NodeCertificate", table_keys<NodeCertificate>(kApi), {}},
      {"Introduction", table_keys<Introduction>(kApi), {}},
      // GET /v1/allocation/:id adds a system allocation's copies (allocation_endpoints.cpp).
      {"Allocation", table_keys<Allocation>(kApi), {"Copies"}},
      {"AllocationStub", table_keys<Allocation>(kStub), {}},
      {"AllocationInput", table_keys<Allocation>(kInput), {}},
      {"VolumeRequest", table_keys<VolumeRequest>(kApi), {}},
      {"Task", table_keys<Task>(kApi), {}},
      {"TaskCSIPlugin", table_keys<TaskCSIPlugin>(kApi), {}},
      {"TaskResources", table_keys<TaskResources>(kApi), {}},
      {"TaskEvent", table_keys<TaskEvent>(kApi), {}},
      {"Rollout", table_keys<Rollout>(kApi), {}},
      {"RolloutNode", table_keys<RolloutNode>(kApi), {}},
      {"Event", table_keys<Event>(kApi), {}},
  };
}

json served() { return json::parse(controlplane::api::openapi_document()); }

TEST(OpenApiFields, EverySchemaNamesExactlyTheFieldsItsTableWrites) {
  const auto doc = served();
  std::string all;
  for (const auto& c : cases()) all += differs(doc, c.schema, c.keys, c.added_by_endpoint);
  EXPECT_EQ(all, "") << "docs/api/openapi.yaml and shared/domain/json/ differ";
}

// ---- planted: a field the schema lacks, and one the table does not have ----

TEST(OpenApiFields, AFieldTheSchemaLacksIsReported) {
  auto doc = served();
  doc["components"]["schemas"]["Claim"]["properties"].erase("NextAttempt");
  EXPECT_EQ(differs(doc, "Claim", table_keys<Claim>(codec::kApi)),
            "Claim: the field table writes \"NextAttempt\", the schema lacks it\n");
}

TEST(OpenApiFields, ASchemaFieldNoTableWritesIsReported) {
  auto doc = served();
  doc["components"]["schemas"]["NodeStub"]["properties"]["Plugins"] = json::object();
  EXPECT_EQ(differs(doc, "NodeStub", table_keys<Node>(codec::kStub)),
            "NodeStub: the schema has \"Plugins\", the field table has no such field\n");
}

}  // namespace
}  // namespace mooring::domain
