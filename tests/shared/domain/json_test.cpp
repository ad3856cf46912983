// JSON codecs: storage round trips for every type, API redaction, and strict API input errors
// that name the object and the field.
#include "shared/domain/json.hpp"

#include <gtest/gtest.h>

#include "tests/shared/domain/json_samples.hpp"
#include <nlohmann/json.hpp>

namespace mooring::domain {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using namespace samples;

// ------------------------------------------------------------------ storage round trips

TEST(JsonStorage, VolumeRoundTripsWithSecretsAndClaims) {
  const Volume v = sample_volume();
  const json j = to_storage_json(v);
  EXPECT_EQ(j["Secrets"]["token"], "s3cr3t");
  EXPECT_EQ(j["MountOptions"]["MountFlags"][1], "password=hunter2");
  auto back = volume_from_storage(json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, v);
}

TEST(JsonStorage, EmptyVolumeRoundTrips) {
  Volume v;
  v.id = "v";
  auto back = volume_from_storage(to_storage_json(v));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, v);
}

TEST(JsonStorage, ClaimRoundTrips) {
  const Claim c = sample_claim("a", ClaimMode::write, ClaimState::controller_detached);
  auto back = claim_from_storage(to_storage_json(c));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, c);
}

// A plugin's row keeps its id and indexes only: its instances are stored in the node rows and
// the rest is derived from them (services/controlplane/state/plugin_aggregates.hpp).
TEST(JsonStorage, APluginsRowIsItsIdAndIndexesAndAnInstanceRoundTrips) {
  const Plugin p = sample_plugin();
  ASSERT_FALSE(p.nodes.empty());
  const json stored = to_storage_json(p);
  EXPECT_EQ(stored, (json{{"ID", p.id}, {"CreateIndex", p.create_index}, {"ModifyIndex", p.modify_index}}));
  auto back = plugin_from_storage(json::parse(stored.dump()));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->id, p.id);
  EXPECT_EQ(back->modify_index, p.modify_index);
  EXPECT_TRUE(back->nodes.empty());
  // A row written before (maps and counts in it) still decodes.
  auto old = plugin_from_storage(to_api_json(p));
  ASSERT_TRUE(old.ok()) << old.error();
  EXPECT_EQ(old->id, p.id);
  const auto i = sample_instance("n9", PluginType::controller);
  auto ib = plugin_instance_from_storage(to_storage_json(i));
  ASSERT_TRUE(ib.ok()) << ib.error();
  EXPECT_EQ(*ib, i);
  EXPECT_FALSE(ib->node_info.has_value());
}

TEST(JsonStorage, NodeRoundTrips) {
  const Node n = sample_node();
  auto back = node_from_storage(json::parse(to_storage_json(n).dump()));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, n);
}

TEST(JsonStorage, AllocationRoundTripsWithAndWithoutTask) {
  Allocation a = sample_allocation();
  auto back = allocation_from_storage(json::parse(to_storage_json(a).dump()));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(back->task->env.at("DB_PASSWORD"), "pw");
  a.task.reset();
  a.stop_after_client_disconnect = 0ms;
  back = allocation_from_storage(to_storage_json(a));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, a);
}

TEST(JsonStorage, EventRoundTrips) {
  const Event e{5, from_unix_ms(1'700'000'000'001), "Claim", "ClaimReleased", "team-a", "vol-1", "released", {{"alloc", "a1"}},
                123'456'789'012};
  auto back = event_from_storage(to_storage_json(e));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, e);
}

TEST(JsonStorage, IgnoresUnknownFieldsButChecksTypes) {
  json j = to_storage_json(sample_volume());
  j["FieldFromTheFuture"] = 1;
  EXPECT_TRUE(volume_from_storage(j).ok());
  j["Capacity"] = "big";
  auto bad = volume_from_storage(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("\"Capacity\""), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("vol-1"), std::string::npos) << bad.error();
}

TEST(JsonStorage, RejectsBadEnumsAndMissingIds) {
  json j = to_storage_json(sample_allocation());
  j["ClientStatus"] = "exploded";
  auto bad = allocation_from_storage(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("unknown client status \"exploded\""), std::string::npos) << bad.error();
  EXPECT_FALSE(node_from_storage(json::object()).ok());
  EXPECT_FALSE(plugin_from_storage(json::array()).ok());
}

// ------------------------------------------------------------------ API output

TEST(JsonApi, VolumeNeverShowsSecretsAndRedactsMountFlags) {
  const json j = to_api_json(sample_volume());
  EXPECT_FALSE(j.contains("Secrets"));
  EXPECT_EQ(j["MountOptions"]["MountFlags"], json::array({"[REDACTED]"}));
  EXPECT_EQ(j["MountOptions"]["FSType"], "ext4");
  const std::string text = j.dump();
  EXPECT_EQ(text.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(text.find("hunter2"), std::string::npos);
  EXPECT_EQ(text.find("/dev/xvdf"), std::string::npos);  // publish context stays internal
}

TEST(JsonApi, VolumeWithoutMountFlagsShowsEmptyList) {
  Volume v = sample_volume();
  v.mount_options.mount_flags.clear();
  EXPECT_EQ(to_api_json(v)["MountOptions"]["MountFlags"], json::array());
}

TEST(JsonApi, VolumeShowsClaimsAndDerivedFields) {
  Volume v = sample_volume();
  v.schedulable = true;
  v.nodes_healthy = 2;
  const json j = to_api_json(v);
  EXPECT_EQ(j["Schedulable"], true);
  EXPECT_EQ(j["NodesHealthy"], 2);
  EXPECT_EQ(j["CurrentWriters"], 1);
  EXPECT_EQ(j["CurrentReaders"], 1);
  EXPECT_TRUE(j["WriteAllocs"].contains("alloc-w"));
  EXPECT_TRUE(j["ReadAllocs"].contains("alloc-r"));
  EXPECT_FALSE(j["WriteAllocs"].contains("alloc-old"));
  ASSERT_EQ(j["Claims"].size(), 3u);
  const json& past = j["Claims"][0];  // sorted by allocation id: alloc-old first
  EXPECT_EQ(past["AllocationID"], "alloc-old");
  EXPECT_EQ(past["State"], "node-detached");
  EXPECT_EQ(past["Mode"], "write");
  EXPECT_EQ(past["LastError"], "controller unreachable");
  EXPECT_EQ(past["NextAttempt"], format_time(from_unix_ms(1'700'000'100'000)));
  EXPECT_FALSE(j["Claims"][1].contains("NextAttempt"));  // unset times are omitted
  EXPECT_FALSE(past.contains("PublishContext"));
  EXPECT_EQ(j["RequestedCapabilities"][0]["AccessMode"], "multi-node-single-writer");
  EXPECT_EQ(j["RequestedTopologies"]["Preferred"][0]["Segments"]["rack"], "7");
}

// Env is readable with read-alloc (secrets belong in SecretEnv, which shows key names only).
TEST(JsonApi, AllocationShowsEnvButRedactsMountFlags) {
  const json j = to_api_json(sample_allocation());
  EXPECT_EQ(j["Task"]["Env"]["DB_PASSWORD"], sample_allocation().task->env.at("DB_PASSWORD"));
  EXPECT_EQ(j["Task"]["Env"]["MODE"], "prod");
  EXPECT_EQ(j["Task"]["KillTimeout"], "5s");
  EXPECT_EQ(j["StopAfterClientDisconnect"], "1m30s");
  EXPECT_EQ(j["Volumes"]["data"]["MountOptions"]["MountFlags"], json::array({"[REDACTED]"}));
  EXPECT_EQ(j["Volumes"]["data"]["AccessMode"], "multi-node-reader-only");
  EXPECT_EQ(j["DesiredStatus"], "run");
  EXPECT_EQ(j["ClientStatus"], "running");
  EXPECT_EQ(j["Events"][0]["Type"], "Received");
}

TEST(JsonApi, PluginShowsNomadShape) {
  const json j = to_api_json(sample_plugin());
  EXPECT_EQ(j["ControllersHealthy"], 1);
  EXPECT_EQ(j["NodesExpected"], 2);
  EXPECT_EQ(j["ControllerRequired"], true);
  const json& n1 = j["Nodes"]["n1"];
  EXPECT_EQ(n1["Healthy"], true);
  EXPECT_EQ(n1["NodeInfo"]["ID"], "csi-n1");
  EXPECT_EQ(n1["NodeInfo"]["MaxVolumes"], 8);
  EXPECT_EQ(n1["NodeInfo"]["AccessibleTopology"]["Segments"]["zone"], "a");
  EXPECT_EQ(n1["NodeInfo"]["RequiresNodeStageVolume"], true);
  EXPECT_EQ(j["Controllers"]["n1"]["ControllerInfo"]["SupportsAttachDetach"], true);
  EXPECT_TRUE(j["Nodes"]["n2"]["ControllerInfo"].is_null());
  EXPECT_TRUE(n1.contains("UpdateTime"));
}

TEST(JsonApi, StubsCarryListFields) {
  EXPECT_EQ(to_api_stub(sample_volume())["CurrentWriters"], 1);
  EXPECT_FALSE(to_api_stub(sample_volume()).contains("Secrets"));
  EXPECT_EQ(to_api_stub(sample_plugin())["NodesHealthy"], 2);
  EXPECT_EQ(to_api_stub(sample_node())["Status"], "ready");
  EXPECT_EQ(to_api_stub(sample_allocation())["ClientStatus"], "running");
}

TEST(JsonApi, EventAndNodeDetailsRedactCredentialKeys) {
  Event e{1, from_unix_ms(1), "Volume", "Registered", "", "vol-1", "m", {{"secret_token", "x"}, {"plugin", "p"}}};
  const json j = to_api_json(e);
  EXPECT_EQ(j["Details"]["secret_token"], "[REDACTED]");
  EXPECT_EQ(j["Details"]["plugin"], "p");
  const json n = to_api_json(sample_node());
  EXPECT_EQ(n["Events"][0]["Details"]["plugin_id"], "hostpath");
  EXPECT_EQ(n["Plugins"]["hostpath"]["Type"], "monolith");
}

// ------------------------------------------------------------------ API input

json register_body() {
  return json::parse(R"({
    "ID": "vol-1", "Name": "db", "PluginID": "hostpath", "ExternalID": "ext-1",
    "RequestedCapabilities": [{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}],
    "MountOptions": {"FSType": "ext4", "MountFlags": ["noatime"]},
    "Secrets": {"token": "t"}, "Parameters": {"p": "1"}, "Context": {"c": "2"},
    "RequestedCapacityMin": 1024, "RequestedCapacityMax": 4096,
    "RequestedTopologies": {"Required": [{"Segments": {"zone": "a"}}], "Preferred": null}
  })");
}

std::string api_error(const json& j, bool require_external_id = true) {
  auto v = volume_from_api(j, require_external_id);
  EXPECT_FALSE(v.ok());
  return v.ok() ? "" : v.error();
}

TEST(JsonApiInput, RegisterBodyDecodes) {
  auto v = volume_from_api(register_body(), true);
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_EQ(v->id, "vol-1");
  EXPECT_EQ(v->external_id, "ext-1");
  EXPECT_EQ(v->secrets.at("token"), "t");
  EXPECT_EQ(v->mount_options.mount_flags, std::vector<std::string>{"noatime"});
  ASSERT_EQ(v->requested_capabilities.size(), 1u);
  EXPECT_EQ(v->requested_capabilities[0].access_mode, AccessMode::single_node_writer);
  EXPECT_EQ(v->requested_topologies.required.at(0).segments.at("zone"), "a");
  EXPECT_TRUE(v->requested_topologies.preferred.empty());
  EXPECT_EQ(v->requested_capacity_max, 4096);
}

TEST(JsonApiInput, NameDefaultsToId) {
  json j = register_body();
  j.erase("Name");
  auto v = volume_from_api(j, true);
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_EQ(v->name, "vol-1");
}

TEST(JsonApiInput, BadAccessModeNamesVolumeAndField) {
  json j = register_body();
  j["RequestedCapabilities"][0]["AccessMode"] = "single-writer";
  EXPECT_EQ(api_error(j),
            "volume \"vol-1\": field \"RequestedCapabilities[0].AccessMode\": unknown access mode \"single-writer\"");
}

TEST(JsonApiInput, LegacyTopLevelModesAreFoldedIntoCapabilities) {
  json j = register_body();
  j.erase("RequestedCapabilities");
  j["AccessMode"] = "multi-node-reader-only";
  j["AttachmentMode"] = "file-system";
  auto v = volume_from_api(j, true);
  ASSERT_TRUE(v.ok()) << v.error();
  ASSERT_EQ(v->requested_capabilities.size(), 1u);
  EXPECT_EQ(v->requested_capabilities[0].access_mode, AccessMode::multi_node_reader_only);
  j["AccessMode"] = "single-writer";
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"AccessMode\": unknown access mode \"single-writer\"");
}

TEST(JsonApiInput, UnknownFieldsAreRejectedAtAnyDepth) {
  json j = register_body();
  j["Secret"] = {{"a", "b"}};
  EXPECT_EQ(api_error(j), "volume \"vol-1\": unknown field \"Secret\"");
  j = register_body();
  j["MountOptions"]["Flags"] = json::array();
  EXPECT_EQ(api_error(j), "volume \"vol-1\": unknown field \"MountOptions.Flags\"");
  j = register_body();
  j["RequestedCapabilities"][0]["Mode"] = "x";
  EXPECT_EQ(api_error(j), "volume \"vol-1\": unknown field \"RequestedCapabilities[0].Mode\"");
}

TEST(JsonApiInput, WrongTypesNameTheField) {
  json j = register_body();
  j["RequestedCapacityMin"] = "10GiB";
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"RequestedCapacityMin\": expected an integer, got string");
  j = register_body();
  j["Secrets"] = {{"token", 5}};
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"Secrets.token\": expected a string, got integer");
  j = register_body();
  j["MountOptions"]["MountFlags"] = "noatime";
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"MountOptions.MountFlags\": expected an array of strings, got string");
  j = register_body();
  j["RequestedCapabilities"] = {{"AccessMode", "x"}};
  EXPECT_NE(api_error(j).find("field \"RequestedCapabilities\": expected an array"), std::string::npos);
  EXPECT_EQ(api_error(json::array()), "volume: expected a JSON object, got array");
  j = register_body();
  j["RequestedCapacityMin"] = 1.5;
  EXPECT_NE(api_error(j).find("expected an integer, got number"), std::string::npos);
  j = register_body();
  j["RequestedCapacityMin"] = -1;
  EXPECT_NE(api_error(j).find("must not be negative"), std::string::npos);
}

TEST(JsonApiInput, RequiredFieldsAndInvariants) {
  json j = register_body();
  j.erase("PluginID");
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"PluginID\": required");
  j = register_body();
  j.erase("ExternalID");
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"ExternalID\": required");
  EXPECT_TRUE(volume_from_api(j, false).ok());  // create: the plugin assigns it
  EXPECT_NE(api_error(register_body(), false).find("must not be set when creating"), std::string::npos);
  j = register_body();
  j.erase("RequestedCapabilities");
  EXPECT_NE(api_error(j).find("field \"RequestedCapabilities\": at least one"), std::string::npos);
  j = register_body();
  j["RequestedCapabilities"][0].erase("AttachmentMode");
  EXPECT_EQ(api_error(j), "volume \"vol-1\": field \"RequestedCapabilities[0].AttachmentMode\": required");
  j = register_body();
  j["RequestedCapacityMax"] = 10;
  EXPECT_NE(api_error(j).find("RequestedCapacityMax"), std::string::npos);
  j = register_body();
  j["SnapshotID"] = "s";
  j["CloneID"] = "c";
  EXPECT_NE(api_error(j).find("CloneID"), std::string::npos);
  j = register_body();
  j.erase("ID");
  EXPECT_EQ(api_error(j), "volume: field \"ID\": required");
}

TEST(JsonApiInput, TraversalIdsAreRejected) {
  json j = register_body();
  j["ID"] = "../../etc";
  const std::string err = api_error(j);
  EXPECT_NE(err.find("field \"ID\": invalid volume id"), std::string::npos) << err;
  j = register_body();
  j["PluginID"] = "a/b";
  EXPECT_NE(api_error(j).find("field \"PluginID\": invalid plugin id"), std::string::npos);
}

TEST(JsonApiInput, VolumesRequestWrapper) {
  json body = {{"Volumes", json::array({register_body()})}};
  auto vs = volumes_request_from_api(body, true);
  ASSERT_TRUE(vs.ok()) << vs.error();
  EXPECT_EQ(vs->size(), 1u);
  EXPECT_FALSE(volumes_request_from_api(json{{"Volumes", json::array()}}, true).ok());
  auto bad = volumes_request_from_api(json{{"Volume", json::array()}}, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "request: unknown field \"Volume\"");
  body["Volumes"][0]["RequestedCapabilities"][0]["AttachmentMode"] = "disk";
  bad = volumes_request_from_api(body, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("volume \"vol-1\": field \"RequestedCapabilities[0].AttachmentMode\": unknown "
                             "attachment mode \"disk\""),
            std::string::npos);
}

json submit_body() {
  return json::parse(R"({"Allocation": {
    "Name": "web", "NodeID": "n1", "StopAfterClientDisconnect": "30s",
    "Volumes": {"data": {"Type": "csi", "Source": "vol-1", "ReadOnly": false,
                         "AccessMode": "single-node-writer", "AttachmentMode": "file-system",
                         "PerAlloc": false, "MountOptions": {"FSType": "ext4", "MountFlags": []}}},
    "Task": {"Command": "/bin/sleep", "Args": ["10"], "Env": {"A": "b"}, "KillTimeout": "5s"}
  }})");
}

std::string submit_error(const json& j) {
  auto a = allocation_request_from_api(j);
  EXPECT_FALSE(a.ok());
  return a.ok() ? "" : a.error();
}

TEST(JsonApiInput, AllocationSubmitDecodes) {
  auto a = allocation_request_from_api(submit_body());
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->name, "web");
  EXPECT_EQ(a->node_id, "n1");
  EXPECT_EQ(a->stop_after_client_disconnect, 30s);
  ASSERT_TRUE(a->task.has_value());
  EXPECT_EQ(a->task->kill_timeout, 5s);
  EXPECT_EQ(a->task->args, std::vector<std::string>{"10"});
  const auto& r = a->volumes.at("data");
  EXPECT_EQ(r.name, "data");
  EXPECT_EQ(r.source, "vol-1");
  EXPECT_EQ(r.access_mode, AccessMode::single_node_writer);
  EXPECT_EQ(r.mount_options.fs_type, "ext4");
}

TEST(JsonApiInput, AllocationWithoutTaskOrTypeIsFine) {
  json j = submit_body();
  j["Allocation"].erase("Task");
  j["Allocation"]["Volumes"]["data"].erase("Type");
  auto a = allocation_request_from_api(j);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_FALSE(a->task.has_value());
  EXPECT_EQ(a->volumes.at("data").type, "csi");
}

TEST(JsonApiInput, CsiPluginTaskDecodesWithNomadDefaults) {
  json j = submit_body();
  j["Allocation"]["System"] = true;
  j["Allocation"]["NodeSelector"] = {{"name", "worker-*"}};
  j["Allocation"]["Task"]["CSIPlugin"] = {{"ID", "hostpath"}, {"Type", "node"}};
  auto a = allocation_request_from_api(j);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_TRUE(a->system);
  EXPECT_EQ(a->node_selector.at("name"), "worker-*");
  ASSERT_TRUE(a->task->csi_plugin.has_value());
  const auto& p = *a->task->csi_plugin;
  EXPECT_EQ(p.id, "hostpath");
  EXPECT_EQ(p.type, PluginType::node);
  EXPECT_EQ(p.mount_dir, "csi");
  EXPECT_EQ(p.health_timeout, 30s);
  EXPECT_EQ(p.stage_publish_base_dir, "");
  const json out = to_api_json(*a);
  EXPECT_EQ(out["Task"]["CSIPlugin"]["ID"], "hostpath");
  EXPECT_EQ(out["Task"]["CSIPlugin"]["HealthTimeout"], "30s");
  EXPECT_EQ(out["System"], true);
  a->id = "a1";
  auto stored = allocation_from_storage(to_storage_json(*a));
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ(stored->task, a->task);
  EXPECT_EQ(stored->node_selector, a->node_selector);
}

TEST(JsonApiInput, CsiPluginTaskErrorsNameTheField) {
  auto with = [](json plugin) {
    json j = submit_body();
    j["Allocation"]["Task"]["CSIPlugin"] = std::move(plugin);
    return submit_error(j);
  };
  EXPECT_EQ(with({{"Type", "node"}}), "allocation \"web\": field \"Task.CSIPlugin.ID\": required");
  EXPECT_NE(with({{"ID", "hp"}, {"Type", "sidecar"}}).find("field \"Task.CSIPlugin.Type\": unknown plugin type"),
            std::string::npos);
  EXPECT_NE(with({{"ID", "hp"}, {"MountDir", "../../etc"}}).find("field \"Task.CSIPlugin.MountDir\": must be a relative path"),
            std::string::npos);
  EXPECT_NE(with({{"ID", "hp"}, {"MountDir", "/run/csi"}}).find("Task.CSIPlugin.MountDir"), std::string::npos);
  EXPECT_NE(with({{"ID", "hp"}, {"HealthTimeout", "0s"}}).find("field \"Task.CSIPlugin.HealthTimeout\": must be positive"),
            std::string::npos);
  EXPECT_NE(with({{"ID", "hp"}, {"StagePublishBaseDir", "rel"}}).find("must be an absolute path"), std::string::npos);
  EXPECT_NE(with({{"ID", "bad id!"}}).find("Task.CSIPlugin.ID"), std::string::npos);
  EXPECT_EQ(with({{"ID", "hp"}, {"Sockt", "x"}}), "allocation \"web\": unknown field \"Task.CSIPlugin.Sockt\"");
}

// The agent's fallback when a node plugin lacks VOLUME_MOUNT_GROUP: chosen per volume or request,
// spelled as Kubernetes' fsGroupChangePolicy, shown only when set; anything else is refused, named.
TEST(JsonApiInput, AGroupChangePolicyIsOneOfThreeAndShownOnlyWhenSet) {
  json j = submit_body();
  j["Allocation"]["Volumes"]["data"]["MountOptions"]["GroupChangePolicy"] = "Always";
  auto a = allocation_request_from_api(j);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->volumes.at("data").mount_options.group_change_policy, domain::GroupChangePolicy::always);
  EXPECT_EQ(to_api_json(a->volumes.at("data").mount_options)["GroupChangePolicy"], "Always");
  EXPECT_FALSE(to_api_json(domain::MountOptions{}).contains("GroupChangePolicy"));
  j["Allocation"]["Volumes"]["data"]["MountOptions"]["GroupChangePolicy"] = "Sometimes";
  EXPECT_EQ(submit_error(j), "allocation \"web\": field \"Volumes.data.MountOptions.GroupChangePolicy\": unknown "
                             "group change policy (OnRootMismatch, Always or None) \"Sometimes\"");
}

TEST(JsonApiInput, AllocationErrorsNameTheField) {
  json j = submit_body();
  j["Allocation"]["Volumes"]["data"]["AccessMode"] = "single-writer";
  EXPECT_EQ(submit_error(j),
            "allocation \"web\": field \"Volumes.data.AccessMode\": unknown access mode \"single-writer\"");
  j = submit_body();
  j["Allocation"]["StopAfterClientDisconnect"] = 30;
  EXPECT_NE(submit_error(j).find("field \"StopAfterClientDisconnect\": expected a duration string"), std::string::npos);
  j = submit_body();
  j["Allocation"]["Task"]["KillTimeout"] = "5 seconds";
  EXPECT_NE(submit_error(j).find("field \"Task.KillTimeout\": invalid duration \"5 seconds\""), std::string::npos);
  j = submit_body();
  j["Allocation"]["Volumes"]["data"].erase("Source");
  EXPECT_EQ(submit_error(j), "allocation \"web\": field \"Volumes.data.Source\": required");
  j = submit_body();
  j["Allocation"]["Volumes"]["data"]["Source"] = "../x";
  EXPECT_NE(submit_error(j).find("invalid volume id"), std::string::npos);
  j = submit_body();
  j["Allocation"]["Volumes"]["data"]["Type"] = "host";
  EXPECT_NE(submit_error(j).find("unsupported volume type \"host\""), std::string::npos);
  j = submit_body();
  j["Allocation"]["Task"]["Commnd"] = "x";
  EXPECT_EQ(submit_error(j), "allocation \"web\": unknown field \"Task.Commnd\"");
  j = submit_body();
  j["Allocation"]["Task"].erase("Command");
  EXPECT_EQ(submit_error(j), "allocation \"web\": field \"Task.Command\": required");
  j = submit_body();
  j["Allocation"]["NodeID"] = "n/1";
  EXPECT_NE(submit_error(j).find("field \"NodeID\": invalid node id"), std::string::npos);
  j = submit_body();
  j["Allocation"]["ID"] = "chosen-by-me";
  EXPECT_EQ(submit_error(j), "allocation \"web\": unknown field \"ID\"");
  EXPECT_EQ(submit_error(json::object()), "request: field \"Allocation\": required");
  j = submit_body();
  j["Allocation"]["Volumes"]["data"]["AttachmentMode"] = nullptr;
  EXPECT_EQ(submit_error(j), "allocation \"web\": field \"Volumes.data.AttachmentMode\": required");
}

// What reaches the task's argv and environment, or a plugin's C strings, cannot be cut short or
// set another variable than the one named.
TEST(JsonApiInput, EnvNamesAndNulBytesAreRefusedNamingTheField) {
  struct Case {
    const char* what;
    void (*edit)(json&);
    std::string error;
  };
  const std::string web = "allocation \"web\": ";
  const std::vector<Case> cases{
      {"= in an Env name", [](json& a) { a["Task"]["Env"]["A=B"] = "x"; },
       web + "field \"Task.Env\": variable name \"A=B\" must not contain \"=\""},
      {"empty Env name", [](json& a) { a["Task"]["Env"][""] = "x"; },
       web + "field \"Task.Env\": a variable name must not be empty"},
      {"= in a SecretEnv name", [](json& a) { a["Task"]["SecretEnv"]["=X"] = "s"; },
       web + "field \"Task.SecretEnv\": variable name \"=X\" must not contain \"=\""},
      {"NUL in an Env name", [](json& a) { a["Task"]["Env"][std::string("A\0B", 3)] = "x"; },
       web + "field \"Task.Env\": a key must not contain a NUL byte"},
      {"NUL in a SecretEnv name", [](json& a) { a["Task"]["SecretEnv"][std::string("S\0", 2)] = "x"; },
       web + "field \"Task.SecretEnv\": a key must not contain a NUL byte"},
      {"NUL in an Env value", [](json& a) { a["Task"]["Env"]["A"] = std::string("b\0c", 3); },
       web + "field \"Task.Env.A\": must not contain a NUL byte"},
      {"NUL in an argument", [](json& a) { a["Task"]["Args"] = {"ok", std::string("x\0", 2)}; },
       web + "field \"Task.Args[1]\": must not contain a NUL byte"},
      {"NUL in the command", [](json& a) { a["Task"]["Command"] = std::string("/bin/sh\0", 8); },
       web + "field \"Task.Command\": must not contain a NUL byte"},
      {"NUL in a mount flag", [](json& a) { a["Volumes"]["data"]["MountOptions"]["MountFlags"] = {std::string("ro\0", 3)}; },
       web + "field \"Volumes.data.MountOptions.MountFlags[0]\": must not contain a NUL byte"},
      {"NUL in a volume request name", [](json& a) { a["Volumes"][std::string("d\0", 2)] = a["Volumes"]["data"]; },
       web + "field \"Volumes\": a key must not contain a NUL byte"},
      {"NUL in a duration", [](json& a) { a["Task"]["KillTimeout"] = std::string("5s\0", 3); },
       web + "field \"Task.KillTimeout\": must not contain a NUL byte"},
  };
  for (const auto& c : cases) {
    json j = submit_body();
    c.edit(j["Allocation"]);
    EXPECT_EQ(submit_error(j), c.error) << c.what;
  }
  json fine = submit_body();
  fine["Allocation"]["Task"]["Env"] = {{"PATH_EXTRA", "a=b"}, {"lower.dotted-name", ""}};  // "=" in a value is fine
  fine["Allocation"]["Task"]["SecretEnv"] = {{"TOKEN", "s"}};
  EXPECT_TRUE(allocation_request_from_api(fine).ok());
  // Storage keeps whatever was stored: the rule is for input.
  Allocation stored = sample_allocation();
  stored.task->args = {std::string("x\0", 2)};
  EXPECT_TRUE(allocation_from_storage(to_storage_json(stored)).ok());
}

TEST(JsonApiInput, VolumeStringsWithNulBytesAreRefusedNamingTheField) {
  json v = {{"ID", "vol-1"}, {"PluginID", "hostpath"}, {"ExternalID", "ext"},
            {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}},
            {"Parameters", {{"size", std::string("1\0G", 3)}}}};
  auto bad = volume_from_api(v, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "volume \"vol-1\": field \"Parameters.size\": must not contain a NUL byte");
  v["Parameters"] = json::object();
  v["Context"] = {{std::string("k\0", 2), "v"}};
  bad = volume_from_api(v, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "volume \"vol-1\": field \"Context\": a key must not contain a NUL byte");
}

TEST(JsonApiInput, PerAllocSourceIsABaseId) {
  json j = submit_body();
  j["Allocation"]["Volumes"]["data"]["PerAlloc"] = true;
  EXPECT_TRUE(allocation_request_from_api(j).ok());
  j["Allocation"]["Volumes"]["data"]["Source"] = "vol[0]";
  EXPECT_FALSE(allocation_request_from_api(j).ok());
}

TEST(JsonApiInput, MountOptionsObject) {
  auto m = mount_options_from_api(json{{"FSType", "xfs"}, {"MountFlags", {"a"}}}, "volume \"v\"");
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->fs_type, "xfs");
  auto bad = mount_options_from_api(json{{"FsType", "xfs"}}, "volume \"v\"");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "volume \"v\": unknown field \"FsType\"");
}

}  // namespace
}  // namespace mooring::domain
