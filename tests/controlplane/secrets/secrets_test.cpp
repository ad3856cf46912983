// Encryption at rest: the sealer (AES-256-GCM through OpenSSL), the keyring file (root keys), the
// data keys wrapped in the state, and the sealed backend over a real SQLite file — secrets absent
// from the file's bytes, migration of plain and file-key-sealed state, rotations (data and root)
// that never write the keyring file, and every way a start must fail loudly instead of losing
// secrets.
#include "services/controlplane/secrets/data_keys.hpp"
#include "services/controlplane/secrets/keyring.hpp"
#include "services/controlplane/secrets/keyring_rotation.hpp"
#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/secrets/sealer.hpp"
#include "services/controlplane/state/idempotent_request.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/api/api.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "tests/controlplane/support/fake_controller.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane::secrets {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

constexpr const char* kVolumeSecret = "volume-password-3f9a1c";
constexpr const char* kTaskSecret = "task-token-77b2e0";

Keyring keyring_at(const std::filesystem::path& path) {
  auto ring = Keyring::load_or_new(path);
  EXPECT_TRUE(ring) << ring.error();
  return std::move(*ring);
}

// ---- sealer ----

TEST(SealerTest, SealedValueOpensWithItsKeyAndPlaceOnly) {
  test::TempDir dir;
  auto ring = keyring_at(dir / "keyring");
  auto a = seal(ring.active(), "hunter2", "volumes|v1|Secrets");
  auto b = seal(ring.active(), "hunter2", "volumes|v1|Secrets");
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b) << "a fresh nonce per seal";
  EXPECT_TRUE(is_sealed(*a));
  EXPECT_EQ(sealed_key_id(*a), ring.active().id);
  EXPECT_EQ(a->find("hunter2"), std::string::npos);
  auto opened = open_sealed(ring, *a, "volumes|v1|Secrets");
  ASSERT_TRUE(opened) << opened.error();
  EXPECT_EQ(*opened, "hunter2");

  auto moved = open_sealed(ring, *a, "volumes|v2|Secrets");
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().find("does not open"), std::string::npos) << moved.error();

  std::string tampered = *a;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(open_sealed(ring, tampered, "volumes|v1|Secrets"));

  auto other = keyring_at(dir / "other");
  auto unknown = open_sealed(other, *a, "volumes|v1|Secrets");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find((dir / "other").string()), std::string::npos) << unknown.error();
  EXPECT_EQ(unknown.error().find("hunter2"), std::string::npos);
}

TEST(SealerTest, Base64RoundTripsEveryLength) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(base64_decode("abc"));
}

// ---- keyring ----

TEST(KeyringTest, ANewKeyringIsWrittenPrivateOnSaveAndReadsBack) {
  test::TempDir dir;
  auto ring = keyring_at(dir / "keyring");
  EXPECT_FALSE(ring.on_disk());
  EXPECT_FALSE(std::filesystem::exists(dir / "keyring")) << "nothing written before save()";
  ASSERT_TRUE(ring.save());
  struct stat st {};
  ASSERT_EQ(::stat((dir / "keyring").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = keyring_at(dir / "keyring");
  EXPECT_TRUE(again.on_disk());
  EXPECT_EQ(again.active().id, ring.active().id);
  EXPECT_EQ(again.active().bytes, ring.active().bytes);
}

TEST(KeyringTest, ACorruptKeyringIsAnErrorNamingTheFile) {
  test::TempDir dir;
  auto ring = keyring_at(dir / "keyring");
  auto good = json::parse(ring.to_text());
  auto short_key = good;
  short_key["Keys"][0]["Key"] = "c2hvcnQ=";
  auto no_active = good;
  no_active["Active"] = "missing";
  for (const std::string& text : {std::string("{not json"), short_key.dump(), no_active.dump(), std::string("{}")}) {
    test::write_file(dir / "keyring", text);
    auto r = Keyring::load_or_new(dir / "keyring");
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().find((dir / "keyring").string()), std::string::npos) << r.error();
  }
}

// ---- the sealed backend over SQLite ----

class SealedStateTest : public ::testing::Test {
 protected:
  std::filesystem::path data() const { return dir / "data"; }
  std::filesystem::path keyring_path() const { return dir / "data" / "keyring"; }

  static domain::Volume volume(const std::string& id) {
    domain::Volume v;
    v.id = id;
    v.plugin_id = "p";
    v.external_id = "ext-" + id;
    v.requested_capabilities = {{domain::AccessMode::single_node_writer, domain::AttachmentMode::file_system}};
    v.secrets = {{"password", kVolumeSecret}};
    return v;
  }
  static domain::Allocation allocation(const std::string& id) {
    domain::Allocation a;
    a.id = id;
    a.node_id = "n1";
    a.task = domain::Task{};
    a.task->command = "/bin/true";
    a.task->env = {{"MODE", "plain"}};
    a.task->secret_env = {{"TOKEN", kTaskSecret}};
    return a;
  }

  // Opens the data dir (optionally sealed) and loads it; the status of the load.
  domain::Status open(bool sealed_too = true) {
    store.reset();
    sealed.reset();
    sqlite.reset();
    auto b = SqliteBackend::open(data());
    if (!b) return domain::error(b.error());
    sqlite = std::move(*b);
    StateBackend* top = sqlite.get();
    if (sealed_too) {
      auto ring = Keyring::load_or_new(keyring_path());
      if (!ring) return domain::error(ring.error());
      sealed = std::make_unique<SealedBackend>(*sqlite, std::move(*ring));
      top = sealed.get();
    }
    store = std::make_unique<StateStore>(io.get_executor(), *top);
    return store->load();
  }
  void put(domain::Volume v, std::optional<domain::Allocation> a = std::nullopt) {
    Batch b;
    b.put(std::move(v));
    if (a) b.put(std::move(*a));
    ASSERT_TRUE(store->commit(std::move(b)));
  }
  // Every byte SQLite keeps: the database, its WAL and shared memory file.
  std::string raw_bytes() const {
    return test::read_file(data() / "state.db") + test::read_file(data() / "state.db-wal") +
           test::read_file(data() / "state.db-shm");
  }
  std::string raw_row(Table t, const std::string& key) {
    auto snap = sqlite->load();
    EXPECT_TRUE(snap);
    return snap->rows[t][key];
  }
  void write_raw_row(Table t, const std::string& key, const std::string& text) {
    ASSERT_TRUE(sqlite->apply(Transaction{.index = store->index(), .mutations = {{t, key, text}}, .tables = {}}));
  }

  // The operator's rotation (PUT /v1/operator/keyring/rotate[?root=true]) on the loaded store.
  domain::Expected<KeyringRotated> rotate(bool root = false, bool* conflict = nullptr) {
    std::optional<domain::Expected<KeyringRotated>> out;
    auto run = [&]() -> asio::awaitable<void> { out.emplace(co_await rotate_keyring(*sealed, *store, root, conflict)); };
    asio::co_spawn(io, run(), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.restart();
    io.run();
    return std::move(*out);
  }
  // The keyring file with one more root key, made the active one.
  void add_root_key() {
    auto ring = json::parse(test::read_file(keyring_path()));
    auto key = make_key();
    ASSERT_TRUE(key);
    const std::string material(reinterpret_cast<const char*>(key->bytes.data()), key->bytes.size());
    ring["Keys"].push_back({{"ID", key->id}, {"Key", base64_encode(material)}, {"Created", key->created}});
    ring["Active"] = key->id;
    test::write_file(keyring_path(), ring.dump(2));
  }
  // The keyring file without root key `id`.
  void drop_root_key(const std::string& id) {
    auto ring = json::parse(test::read_file(keyring_path()));
    auto& keys = ring["Keys"];
    for (auto it = keys.begin(); it != keys.end(); ++it)
      if ((*it)["ID"] == id) {
        keys.erase(it);
        break;
      }
    test::write_file(keyring_path(), ring.dump(2));
  }

  test::TempDir dir{"sealed-state"};
  asio::io_context io;
  std::unique_ptr<SqliteBackend> sqlite;
  std::unique_ptr<SealedBackend> sealed;
  std::unique_ptr<StateStore> store;
};

TEST_F(SealedStateTest, SecretsNeverReachTheDatabaseBytesAndReadBackWhole) {
  ASSERT_TRUE(open());
  EXPECT_TRUE(std::filesystem::exists(keyring_path())) << "created on the first start";
  put(volume("v1"), allocation("a1"));
  const auto bytes = raw_bytes();
  EXPECT_EQ(bytes.find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(bytes.find(kTaskSecret), std::string::npos);
  EXPECT_NE(bytes.find("plain"), std::string::npos) << "Task.Env is not a secret";
  const auto row = json::parse(raw_row(Table::volumes, "v1"));
  ASSERT_TRUE(row["Secrets"].is_string());
  EXPECT_TRUE(is_sealed(row["Secrets"].get<std::string>()));

  ASSERT_TRUE(open());
  ASSERT_TRUE(store->volume("v1"));
  EXPECT_EQ(store->volume("v1")->secrets.at("password"), kVolumeSecret);
  ASSERT_TRUE(store->allocation("a1"));
  EXPECT_EQ(store->allocation("a1")->task->secret_env.at("TOKEN"), kTaskSecret);
}

TEST_F(SealedStateTest, PlainStateFromBeforeSealingIsSealedOnStartAndScrubbed) {
  ASSERT_TRUE(open(/*sealed_too=*/false));
  put(volume("v1"), allocation("a1"));
  put(volume("v2"));  // overwritten rows too: their old bytes must go
  ASSERT_NE(raw_bytes().find(kVolumeSecret), std::string::npos) << "the old format really is plain";

  ASSERT_TRUE(open());
  EXPECT_EQ(store->volume("v1")->secrets.at("password"), kVolumeSecret);
  EXPECT_EQ(store->allocation("a1")->task->secret_env.at("TOKEN"), kTaskSecret);
  const auto bytes = raw_bytes();
  EXPECT_EQ(bytes.find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(bytes.find(kTaskSecret), std::string::npos);
  EXPECT_TRUE(is_sealed(json::parse(raw_row(Table::volumes, "v2"))["Secrets"].get<std::string>()));
}

TEST_F(SealedStateTest, AKeyringWithoutTheRootKeyFailsTheStartNamingKeyAndFileAndChangesNothing) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  const auto root_id = sealed->root_key_id();
  const auto before = raw_row(Table::volumes, "v1");
  const auto keys_before = raw_row(Table::keyring, kDataKeysRow);
  store.reset();
  sealed.reset();
  std::filesystem::remove(keyring_path());
  auto other = keyring_at(keyring_path());
  ASSERT_TRUE(other.save());

  auto st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find(keyring_path().string()), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("root key \"" + root_id + "\""), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("nothing was changed"), std::string::npos) << st.error();
  EXPECT_EQ(raw_row(Table::volumes, "v1"), before);
  EXPECT_EQ(raw_row(Table::keyring, kDataKeysRow), keys_before);
}

TEST_F(SealedStateTest, AMissingKeyringFailsTheStartAndIsNotReplacedByANewOne) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  std::filesystem::remove(keyring_path());
  auto st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("does not exist"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(keyring_path().string()), std::string::npos) << st.error();
  EXPECT_FALSE(std::filesystem::exists(keyring_path())) << "a new keyring would hide the lost one";
}

TEST_F(SealedStateTest, ACorruptKeyringFailsTheStartNamingTheFile) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  test::write_file(keyring_path(), "{\"Format\":\"mooring-keyring/1\",\"Keys\":[]}");
  auto st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find(keyring_path().string()), std::string::npos) << st.error();
}

TEST_F(SealedStateTest, TamperedOrSwappedCiphertextFailsTheStart) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  put(volume("v2"));
  auto v1 = json::parse(raw_row(Table::volumes, "v1"));
  auto v2 = json::parse(raw_row(Table::volumes, "v2"));

  // v1's sealed secrets copied into v2's row: they are bound to v1.
  auto swapped = v2;
  swapped["Secrets"] = v1["Secrets"];
  write_raw_row(Table::volumes, "v2", swapped.dump());
  auto st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("volumes row \"v2\" field \"Secrets\""), std::string::npos) << st.error();

  // One byte of the ciphertext changed.
  write_raw_row(Table::volumes, "v2", v2.dump());
  auto sealed_text = v1["Secrets"].get<std::string>();
  auto& c = sealed_text[sealed_text.size() - 10];
  c = c == 'A' ? 'B' : 'A';
  v1["Secrets"] = sealed_text;
  write_raw_row(Table::volumes, "v1", v1.dump());
  st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("volumes row \"v1\""), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("does not open"), std::string::npos) << st.error();
}

TEST_F(SealedStateTest, RotationResealsEveryRowWithANewDataKeyAndNeverWritesTheKeyringFile) {
  ASSERT_TRUE(open());
  put(volume("v1"), allocation("a1"));
  const auto old_id = sealed->active_key_id();
  const auto root_id = sealed->root_key_id();
  const auto file_before = test::read_file(keyring_path());
  ::chmod(keyring_path().c_str(), 0400);  // as a Kubernetes Secret is
  auto rotation = rotate();
  ASSERT_TRUE(rotation) << rotation.error();
  EXPECT_FALSE(rotation->root);
  EXPECT_NE(rotation->key_id, old_id);
  EXPECT_EQ(rotation->root_key_id, root_id);
  EXPECT_EQ(rotation->rows_resealed, 2u);
  EXPECT_EQ(rotation->retired, std::vector<std::string>{old_id});
  EXPECT_EQ(sealed->active_key_id(), rotation->key_id);
  EXPECT_EQ(test::read_file(keyring_path()), file_before) << "the keyring file is never written by a rotation";
  EXPECT_EQ(sealed_key_id(json::parse(raw_row(Table::volumes, "v1"))["Secrets"].get<std::string>()), rotation->key_id);
  for (auto [t, key] : {std::pair{Table::volumes, std::string("v1")}, std::pair{Table::allocations, std::string("a1")},
                        std::pair{Table::keyring, std::string(kDataKeysRow)}})
    EXPECT_EQ(raw_row(t, key).find(old_id), std::string::npos) << "the retired data key is gone from " << key;
  // The event is in the same state, naming key ids only.
  ASSERT_FALSE(store->events().empty());
  EXPECT_EQ(store->events().back().type, "KeyringRotated");
  EXPECT_EQ(store->events().back().details.at("retired_keys"), old_id);

  // Writes after the rotation use the new key; a restart opens everything.
  put(volume("v3"));
  ASSERT_TRUE(open());
  EXPECT_EQ(sealed->active_key_id(), rotation->key_id);
  EXPECT_EQ(store->volume("v1")->secrets.at("password"), kVolumeSecret);
  EXPECT_EQ(store->volume("v3")->secrets.at("password"), kVolumeSecret);
  EXPECT_EQ(store->allocation("a1")->task->secret_env.at("TOKEN"), kTaskSecret);
  // And again.
  auto second = rotate();
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->rows_resealed, 3u);
  ASSERT_TRUE(open());
  EXPECT_EQ(store->volume("v3")->secrets.at("password"), kVolumeSecret);
}

TEST_F(SealedStateTest, RootRotationRewrapsTheDataKeysSoTheOldRootKeyCanLeaveTheFile) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  const auto old_root = sealed->root_key_id();
  const auto data_id = sealed->active_key_id();
  bool conflict = false;
  auto refused = rotate(/*root=*/true, &conflict);
  ASSERT_FALSE(refused) << "the file has no new root key yet";
  EXPECT_TRUE(conflict);
  EXPECT_NE(refused.error().find(old_root), std::string::npos) << refused.error();

  add_root_key();  // the operator's step, on every member
  auto rotation = rotate(/*root=*/true);
  ASSERT_TRUE(rotation) << rotation.error();
  EXPECT_TRUE(rotation->root);
  EXPECT_NE(rotation->root_key_id, old_root);
  EXPECT_EQ(rotation->key_id, data_id) << "the data keys stay; only their wrapping changes";
  EXPECT_EQ(rotation->rows_resealed, 0u);
  EXPECT_EQ(rotation->retired, std::vector<std::string>{old_root});
  EXPECT_EQ(raw_row(Table::keyring, kDataKeysRow).find(old_root), std::string::npos);

  drop_root_key(old_root);  // now safe
  ASSERT_TRUE(open());
  EXPECT_EQ(sealed->root_key_id(), rotation->root_key_id);
  EXPECT_EQ(store->volume("v1")->secrets.at("password"), kVolumeSecret);
}

TEST_F(SealedStateTest, DroppingTheRootKeyBeforeTheRootRotationFailsTheStartNamingIt) {
  ASSERT_TRUE(open());
  put(volume("v1"));
  const auto old_root = sealed->root_key_id();
  add_root_key();
  drop_root_key(old_root);
  auto st = open();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("root key \"" + old_root + "\""), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(keyring_path().string()), std::string::npos) << st.error();
}

// State sealed directly with the keyring file's keys (before envelope keys): the first start
// moves it to a data key in one transaction, and the file's key no longer seals any row.
TEST_F(SealedStateTest, StateSealedWithTheFileKeyMigratesToADataKeyOnStart) {
  ASSERT_TRUE(open(/*sealed_too=*/false));
  auto root = keyring_at(keyring_path());
  ASSERT_TRUE(root.save());
  put(volume("v1"), allocation("a1"));
  for (auto [t, key] : {std::pair{Table::volumes, std::string("v1")}, std::pair{Table::allocations, std::string("a1")}}) {
    auto legacy = seal_row(t, key, raw_row(t, key), root.active());
    ASSERT_TRUE(legacy) << legacy.error();
    write_raw_row(t, key, *legacy);
  }
  ASSERT_TRUE(sqlite->scrub());
  ASSERT_EQ(raw_bytes().find(kVolumeSecret), std::string::npos);
  ASSERT_NE(raw_bytes().find(std::string(kSealedPrefix) + root.active().id), std::string::npos) << "the old format";
  const auto index_before = sqlite->load()->index;

  ASSERT_TRUE(open());
  EXPECT_EQ(store->volume("v1")->secrets.at("password"), kVolumeSecret);
  EXPECT_EQ(store->allocation("a1")->task->secret_env.at("TOKEN"), kTaskSecret);
  EXPECT_EQ(sealed->root_key_id(), root.active().id);
  EXPECT_NE(sealed->active_key_id(), root.active().id);
  EXPECT_GT(store->index(), index_before) << "the migration is a transaction of its own";
  EXPECT_NE(raw_row(Table::keyring, kDataKeysRow).find(root.active().id), std::string::npos)
      << "the data key is wrapped by the file's key";
  for (auto [t, key] : {std::pair{Table::volumes, std::string("v1")}, std::pair{Table::allocations, std::string("a1")}}) {
    const auto row = raw_row(t, key);
    EXPECT_EQ(row.find(root.active().id), std::string::npos) << to_string(t) << " " << key;
  }
  EXPECT_EQ(raw_bytes().find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(raw_bytes().find(kTaskSecret), std::string::npos);

  // Once migrated, a restart migrates nothing again.
  const auto data_id = sealed->active_key_id();
  const auto index_after = store->index();
  ASSERT_TRUE(open());
  EXPECT_EQ(sealed->active_key_id(), data_id);
  EXPECT_EQ(store->index(), index_after);
}

// With group commit (as the binary runs): the rotation rides on the commit of its event, so the
// new data-key row, every re-sealed row and the event are ONE transaction; a write that fails
// leaves the old keys and rows (the store reloads them) and the next rotation works.
TEST(SealedGroupCommitTest, ARotationIsOneTransactionWithItsEventAndAFailedOneChangesNothing) {
  test::TempDir dir;
  asio::io_context io;
  FakeBackend fake;
  SealedBackend sealed{fake, keyring_at(dir / "keyring")};
  StateStore store{io.get_executor(), sealed, StateOptions{.group_commit = true}};
  ASSERT_TRUE(store.load());
  auto run = [&](auto make) {
    asio::co_spawn(io, make(), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.restart();
    io.run();
  };
  run([&]() -> asio::awaitable<void> {
    Batch b;
    domain::Volume v;
    v.id = "v1";
    v.plugin_id = "p";
    v.external_id = "ext-v1";
    v.secrets = {{"password", kVolumeSecret}};
    b.put(std::move(v));
    auto index = store.commit(std::move(b));
    EXPECT_TRUE(index);
    EXPECT_TRUE(co_await store.durable(*index));
  });
  const auto old_id = sealed.active_key_id();
  const auto rows_before = fake.snapshot.rows;

  std::optional<domain::Expected<KeyringRotated>> failed;
  fake.fail_apply = true;
  run([&]() -> asio::awaitable<void> { failed.emplace(co_await rotate_keyring(sealed, store, false)); });
  fake.fail_apply = false;
  ASSERT_TRUE(failed && !*failed);
  EXPECT_EQ(sealed.active_key_id(), old_id);
  EXPECT_EQ(fake.snapshot.rows, rows_before);

  std::optional<domain::Expected<KeyringRotated>> done;
  run([&]() -> asio::awaitable<void> { done.emplace(co_await rotate_keyring(sealed, store, false)); });
  ASSERT_TRUE(done && *done) << (done ? done->error() : "");
  EXPECT_EQ(sealed.active_key_id(), (*done)->key_id);
  EXPECT_EQ((*done)->rows_resealed, 1u);
  const Transaction* with_keys = nullptr;
  for (const auto& tx : fake.transactions)
    for (const auto& m : tx.mutations)
      if (m.table == Table::keyring && m.value && m.value->find((*done)->key_id) != std::string::npos) with_keys = &tx;
  ASSERT_NE(with_keys, nullptr);
  bool resealed = false, event = false;
  for (const auto& m : with_keys->mutations) {
    resealed = resealed || (m.table == Table::volumes && m.key == "v1" && m.value->find((*done)->key_id) != std::string::npos);
    event = event || (m.table == Table::events && m.value->find("KeyringRotated") != std::string::npos);
  }
  EXPECT_TRUE(resealed) << "the re-sealed row is in the transaction of the new data key";
  EXPECT_TRUE(event) << "and so is the rotation's event";
  EXPECT_EQ(store.volume("v1")->secrets.at("password"), kVolumeSecret);
  EXPECT_EQ(fake.snapshot.rows[Table::volumes]["v1"].find(kVolumeSecret), std::string::npos);
}

// ---- data keys ----

TEST(DataKeysTest, WrappedKeysOpenOnlyWithTheirRootKeyAndHoldNoKeyMaterial) {
  test::TempDir dir;
  auto root = keyring_at(dir / "keyring");
  auto data = new_data_keys(root.active().id);
  ASSERT_TRUE(data) << data.error();
  auto row = wrap_data_keys(data->keys, root.active());
  ASSERT_TRUE(row) << row.error();
  const auto& key = data->keys.active();
  const std::string material(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  EXPECT_EQ(row->find(base64_encode(material)), std::string::npos);
  EXPECT_EQ(row->find(material), std::string::npos);

  auto back = unwrap_data_keys(*row, root);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->wrapped_by, root.active().id);
  EXPECT_EQ(back->keys.active().id, key.id);
  EXPECT_EQ(back->keys.active().bytes, key.bytes);

  auto other = keyring_at(dir / "other");
  auto refused = unwrap_data_keys(*row, other);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("root key \"" + root.active().id + "\""), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find((dir / "other").string()), std::string::npos) << refused.error();

  // A wrapped key moved under another id does not open (bound to its id).
  auto j = json::parse(*row);
  j["Keys"][0]["ID"] = "0123456789abcdef";
  j["Active"] = "0123456789abcdef";
  auto moved = unwrap_data_keys(j.dump(), root);
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().find("does not open"), std::string::npos) << moved.error();
  EXPECT_FALSE(unwrap_data_keys("{}", root));
}

// Idempotency-Key fingerprints: keyed (no bare hash of a body with secrets in the state), stable
// for one key, different under another, unverifiable once their key is retired.
TEST_F(SealedStateTest, RequestFingerprintsAreKeyedByTheKeyringAndNameTheirKey) {
  ASSERT_TRUE(open());
  const std::string data = "PUT\n/v1/volume/csi/v1\n{\"Secrets\":{\"password\":\"hunter2\"}}";
  const auto old_id = sealed->active_key_id();
  auto first = sealed->fingerprint("", data);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->substr(0, old_id.size() + 1), old_id + ":");
  EXPECT_EQ(first->size(), old_id.size() + 1 + 64);
  EXPECT_EQ(sealed->fingerprint(old_id, data), first);
  EXPECT_NE(sealed->fingerprint("", data + " "), first);
  EXPECT_EQ(first->find(request_fingerprint("PUT", "/v1/volume/csi/v1", "{\"Secrets\":{\"password\":\"hunter2\"}}")),
            std::string::npos);
  auto rotation = rotate();
  ASSERT_TRUE(rotation) << rotation.error();
  EXPECT_FALSE(sealed->fingerprint(old_id, data)) << "the retired key verifies nothing";
  auto second = sealed->fingerprint("", data);
  ASSERT_TRUE(second);
  EXPECT_NE(second->substr(second->find(':')), first->substr(first->find(':')));
}

TEST(SealRowTest, RowsWithoutSecretsPassThroughUnchanged) {
  test::TempDir dir;
  auto ring = keyring_at(dir / "keyring");
  const std::string text = R"({"ID":"v1","Secrets":{},"Parameters":{"Secrets":{"x":"y"}}})";
  auto out = seal_row(Table::volumes, "v1", text, ring.active());
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, text);
  const std::string plugin = R"({"ID":"p","Secrets":{"a":"b"}})";
  EXPECT_EQ(*seal_row(Table::plugins, "p", plugin, ring.active()), plugin) << "only the tables with secrets";
}

}  // namespace
}  // namespace mooring::controlplane::secrets

namespace mooring::controlplane::secrets {
namespace {

// A rotation the store refuses (a degraded leader's store is read-only; so is a resuming one) is
// answered 503 with Retry-After and the store's reason, as every other write then, not 500; and
// nothing changes: the active key stays, the next rotation once writable works.
TEST(KeyringRotationApi, ARotationTheStoreRefusesAnswers503AndKeepsTheKeys) {
  test::TempDir dir;
  asio::io_context io;
  FakeBackend fake;
  SealedBackend sealed{fake, keyring_at(dir / "keyring")};
  StateStore store{io.get_executor(), sealed, StateOptions{.group_commit = true}};
  ASSERT_TRUE(store.load());
  FakeController controller;
  volumes::VolumeLifecycle volumes(io.get_executor(), store, controller);
  api::Api api(store, volumes, api::ApiOptions{.keyring = &sealed});
  auto rotate = [&] {
    http::Request req;
    req.method = "PUT";
    req.target = req.path = "/v1/operator/keyring/rotate";
    std::optional<http::Response> out;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> { out = co_await api.handle(req); }, [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.restart();
    io.run();
    return *out;
  };
  const auto old_id = sealed.active_key_id();
  const auto transactions = fake.transactions.size();
  store.set_read_only("etcd has no quorum or cannot be reached");
  auto refused = rotate();
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_NE(refused.body.find("etcd has no quorum or cannot be reached"), std::string::npos) << refused.body;
  EXPECT_NE(std::find(refused.headers.begin(), refused.headers.end(), std::pair<std::string, std::string>{"Retry-After", "1"}),
            refused.headers.end());
  EXPECT_EQ(sealed.active_key_id(), old_id);
  EXPECT_EQ(fake.transactions.size(), transactions);

  store.set_read_only(std::nullopt);
  auto rotated = rotate();
  EXPECT_EQ(rotated.status, 200u) << rotated.body;
  EXPECT_NE(sealed.active_key_id(), old_id);
}

}  // namespace
}  // namespace mooring::controlplane::secrets
