// One backend volume (provider + external id) is registered under one volume id only: a second
// registration is a 409 naming the first, and stores nothing.
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using Kind = volumes::Failure::Kind;

// Two plugin ids of the same driver (provider "hostpath.mooring.dev"), neither with a controller
// (nothing to validate), and a plugin of another provider.
class RegisterDuplicateTest : public VolumeLifecycleTest {
 protected:
  RegisterDuplicateTest() {
    Batch batch;
    auto other = fixtures::plugin("other", "n1");
    other.nodes.at("n1").provider = "other.example.com";  // the aggregate's follows its instances
    fixtures::put_running(batch, {fixtures::plugin("disk-a", "n1"), fixtures::plugin("disk-b", "n1"), other}, &store);
    for (const auto* ns : {"team", "team-a", "team-b"}) batch.put(NamespaceRecord{.name = ns});  // they exist
    seed(std::move(batch));
  }

  static domain::Volume on(std::string id, std::string plugin, std::string external_id, std::string ns = "default") {
    auto v = fixtures::volume(std::move(id), std::move(plugin));
    v.external_id = std::move(external_id);
    v.ns = std::move(ns);
    return v;
  }

  volumes::Outcome<volumes::Written> register_all(std::vector<domain::Volume> vs,
                                                  const volumes::Asker* asker = nullptr) {
    return run(lifecycle.register_volumes(std::move(vs), asker ? *asker : anyone));
  }
};

}  // namespace

TEST_F(RegisterDuplicateTest, TheSameExternalIdUnderAnotherVolumeIdIs409NamingItAndStoresNothing) {
  ASSERT_TRUE(register_all({on("first", "disk-a", "disk-1")}));
  const auto before = store.index();
  auto r = register_all({on("second", "disk-a", "disk-1")});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_NE(r.error().message.find("volume \"first\" in namespace \"default\""), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("\"disk-1\""), std::string::npos);
  EXPECT_EQ(store.volume("second"), nullptr);
  EXPECT_EQ(store.index(), before);
}

TEST_F(RegisterDuplicateTest, AnotherPluginIdOfTheSameProviderIsTheSameBackend) {
  ASSERT_TRUE(register_all({on("first", "disk-a", "disk-1")}));
  auto r = register_all({on("second", "disk-b", "disk-1")});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_NE(r.error().message.find("(plugin \"disk-a\")"), std::string::npos) << r.error().message;
}

TEST_F(RegisterDuplicateTest, AnotherNamespaceIsStillTheSameBackendAndIsNamed) {
  ASSERT_TRUE(register_all({on("first", "disk-a", "disk-1", "team")}));
  auto r = register_all({on("first", "disk-a", "disk-1")});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("in namespace \"team\""), std::string::npos) << r.error().message;
  EXPECT_EQ(store.volume("first"), nullptr);
}

TEST_F(RegisterDuplicateTest, AnotherNamespacesVolumeIsNamedOnlyToACallerWhoMayReadIt) {
  ASSERT_TRUE(register_all({on("theirs", "disk-a", "disk-1", "team-b")}));
  acl::Policy own;
  own.namespaces["team-a"].policy = "write";
  const volumes::Asker team_a{.acl = acl::Acl::from_policies({&own}), .token = "team-a", .ns = "team-a"};
  const auto before = store.index();
  auto r = register_all({on("mine", "disk-a", "disk-1", "team-a")}, &team_a);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  for (const auto* of_theirs : {"theirs", "team-b", "disk-1"})
    EXPECT_EQ(r.error().message.find(of_theirs), std::string::npos) << of_theirs << ": " << r.error().message;
  EXPECT_NE(r.error().message.find("\"mine\""), std::string::npos) << r.error().message;
  EXPECT_EQ(store.index(), before);
}

TEST_F(RegisterDuplicateTest, TwiceInOneRequestIsRefusedWhole) {
  auto r = register_all({on("first", "disk-a", "disk-1"), on("second", "disk-b", "disk-1")});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_EQ(store.volume("first"), nullptr);
  EXPECT_EQ(store.volume("second"), nullptr);
}

TEST_F(RegisterDuplicateTest, TheSameExternalIdAtAnotherProviderIsAnotherVolume) {
  ASSERT_TRUE(register_all({on("first", "disk-a", "disk-1")}));
  auto r = register_all({on("second", "other", "disk-1")});
  ASSERT_TRUE(r) << r.error().message;
}

TEST_F(RegisterDuplicateTest, UpdatingTheVolumeItselfIsNoDuplicateAndADeregisteredIdIsFreeAgain) {
  ASSERT_TRUE(register_all({on("first", "disk-a", "disk-1")}));
  auto update = on("first", "disk-a", "disk-1");
  update.name = "renamed";
  auto r = register_all({update});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(lifecycle.deregister("first", false, false));
  auto again = register_all({on("second", "disk-b", "disk-1")});
  ASSERT_TRUE(again) << again.error().message;
}

}  // namespace mooring::controlplane
