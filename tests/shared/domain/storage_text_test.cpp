// The storage text written without a DOM (to_storage_text, codec::write_text) is the DOM's dump
// byte for byte, in every view, for every type and for strings that need escaping; rows it writes
// load back to the same object, and rows the DOM wrote before are the same bytes.
#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"
#include "shared/domain/json/fields.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <nlohmann/json.hpp>

#include "tests/shared/domain/json_samples.hpp"

namespace mooring::domain {
namespace {

using nlohmann::json;
using namespace samples;
using codec::View;

// An allocation with every optional part set: a CSI plugin task with secrets, a system group's
// bookkeeping, a rollout and the 50 events a long-lived allocation keeps.
Allocation busy_allocation() {
  Allocation a = sample_allocation();
  a.task->secret_env = {{"API_KEY", "k-123"}, {"TOKEN", "t\"quoted\""}};
  a.task->csi_plugin = TaskCSIPlugin{.id = "hostpath", .stage_publish_base_dir = "/var/lib/x"};
  a.system = true;
  a.node_selector = {{"name", "worker-*"}, {"zone", "a"}};
  a.system_id = "group-1";
  a.system_nodes["n1"] = SystemNodeState{3, 20s, from_unix_ms(1'700'000'000'000), from_unix_ms(1'699'000'000'000),
                                         true, "stopped by the user"};
  a.system_nodes["n2"] = SystemNodeState{};
  a.rollout = Rollout{12, "running", {RolloutNode{"n1", "starting", "", "old", "new", from_unix_ms(1'700'000'000'123)}}};
  for (int i = 0; i < 50; ++i)
    a.events.push_back(TaskEvent{from_unix_ms(1'700'000'000'000 + i), "Status", "event " + std::to_string(i)});
  return a;
}

template <class T>
void expect_same_text(const T& obj) {
  for (View view : {View::storage, View::api, View::stub})
    EXPECT_EQ(codec::write_text(obj, view), codec::write_object(obj, view).dump()) << "view " << static_cast<int>(view);
}

TEST(StorageText, IsTheDomDumpForEveryTypeAndView) {
  expect_same_text(sample_volume());
  expect_same_text(Volume{});
  expect_same_text(sample_claim("a", ClaimMode::write, ClaimState::controller_detached));
  expect_same_text(sample_plugin());
  expect_same_text(sample_instance("n9", PluginType::controller));
  expect_same_text(sample_node());
  expect_same_text(sample_allocation());
  expect_same_text(busy_allocation());
  expect_same_text(Allocation{});
  expect_same_text(Event{5, from_unix_ms(1'700'000'000'001), "Claim", "ClaimReleased", "team-a", "vol-1", "released",
                         {{"alloc", "a1"}, {"password", "x"}}, 123'456'789'012});
}

TEST(StorageText, PublicWritersMatchToStorageJson) {
  const Volume v = sample_volume();
  const Allocation a = busy_allocation();
  const Event e{7, from_unix_ms(1), "Node", "NodeDown", "", "n1", "missed heartbeats", {}};
  EXPECT_EQ(to_storage_text(v), to_storage_json(v).dump());
  EXPECT_EQ(to_storage_text(sample_plugin()), to_storage_json(sample_plugin()).dump());
  EXPECT_EQ(to_storage_text(sample_node()), to_storage_json(sample_node()).dump());
  EXPECT_EQ(to_storage_text(a), to_storage_json(a).dump());
  EXPECT_EQ(to_storage_text(e), to_storage_json(e).dump());
}

TEST(StorageText, LoadsBackToTheSameObject) {
  const Allocation a = busy_allocation();
  auto back = allocation_from_storage(json::parse(to_storage_text(a)));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, a);
  const Volume v = sample_volume();
  auto vb = volume_from_storage(json::parse(to_storage_text(v)));
  ASSERT_TRUE(vb.ok()) << vb.error();
  EXPECT_EQ(*vb, v);
  const Node n = sample_node();
  auto nb = node_from_storage(json::parse(to_storage_text(n)));
  ASSERT_TRUE(nb.ok()) << nb.error();
  EXPECT_EQ(*nb, n);
  const Plugin p = sample_plugin();  // stored: its id and indexes (the instances are the nodes')
  auto pb = plugin_from_storage(json::parse(to_storage_text(p)));
  ASSERT_TRUE(pb.ok()) << pb.error();
  EXPECT_EQ(std::tie(pb->id, pb->create_index, pb->modify_index), std::tie(p.id, p.create_index, p.modify_index));
}

TEST(StorageText, EscapesStringsAsNlohmannDoes) {
  Allocation a = sample_allocation();
  const std::string tricky[] = {
      "quote \" and backslash \\", "tab\tnewline\nreturn\r", std::string("nul\0byte", 8), "\x01\x1f bell\x07",
      "del \x7f", "caf\xc3\xa9", "emoji \xf0\x9f\x9a\xa2", "/slash/", "",
  };
  for (const auto& s : tricky) {
    a.name = s;
    a.task->env["K " + s] = s;
    a.events.push_back(TaskEvent{from_unix_ms(2), s, s});
  }
  EXPECT_EQ(to_storage_text(a), to_storage_json(a).dump());
  auto back = allocation_from_storage(json::parse(to_storage_text(a)));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, a);
}

TEST(StorageText, InvalidUtf8ThrowsAsTheDomDumpDoes) {
  Allocation a = sample_allocation();
  a.name = "bad \xff byte";
  EXPECT_THROW((void)to_storage_json(a).dump(), json::type_error);
  EXPECT_THROW((void)to_storage_text(a), json::type_error);
}

TEST(StorageText, KeepsTheSecretFieldShapeTheSealerLooksFor) {
  // secrets/sealed_backend.cpp finds a secret map by its compact key, e.g. "SecretEnv":{"
  const Allocation a = busy_allocation();
  EXPECT_NE(to_storage_text(a).find("\"SecretEnv\":{\""), std::string::npos);
  Allocation no_secrets = sample_allocation();
  EXPECT_EQ(to_storage_text(no_secrets).find("SecretEnv"), std::string::npos);  // an empty map is left out
  EXPECT_NE(to_storage_text(sample_volume()).find("\"Secrets\":{\""), std::string::npos);
}

TEST(StorageText, OutOfRangeTimesAreSpelledAsFormatTime) {
  Event e{1, from_unix_ms(-62'200'000'000'000), "T", "T", "", "k", "m", {}};  // before year 0
  EXPECT_EQ(to_storage_text(e), to_storage_json(e).dump());
  e.time = from_unix_ms(253'402'300'800'000);  // year 10000
  EXPECT_EQ(to_storage_text(e), to_storage_json(e).dump());
}

}  // namespace
}  // namespace mooring::domain
