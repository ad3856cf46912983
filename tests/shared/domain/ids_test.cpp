// Id validation: nothing that becomes a path or URL segment can escape its root.
#include "shared/domain/ids.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace mooring::domain {
namespace {

void expect_rejected(IdKind kind, std::string_view id, std::string_view reason_part) {
  auto s = validate_id(kind, id);
  ASSERT_FALSE(s.ok()) << "accepted: " << id;
  EXPECT_NE(s.error().find(to_string(kind)), std::string::npos) << s.error();
  EXPECT_NE(s.error().find(reason_part), std::string::npos) << s.error();
}

TEST(Ids, GoodIdsAreAccepted) {
  for (const char* id : {"vol-1", "a", "A.b_c-9", "3f0e6a1c-9b2d-4c1e-8f3a-5d6b7c8e9f01", "...", ".hidden"}) {
    for (IdKind kind : {IdKind::volume, IdKind::allocation, IdKind::node, IdKind::plugin}) {
      EXPECT_TRUE(validate_id(kind, id).ok()) << id;
    }
  }
  EXPECT_TRUE(validate_volume_id(std::string(128, 'x')).ok());
}

TEST(Ids, TraversalIsRejected) {
  expect_rejected(IdKind::volume, "..", "\"..\"");
  expect_rejected(IdKind::volume, ".", "\".\"");
  expect_rejected(IdKind::allocation, "../etc", "'/'");
  expect_rejected(IdKind::volume, "a/b", "'/'");
  expect_rejected(IdKind::volume, "/abs", "'/'");
  expect_rejected(IdKind::node, "a\\b", "'\\'");
  expect_rejected(IdKind::volume, "..[0]", "\"..\"");
}

TEST(Ids, EmptyOverlongNulAndControlCharactersAreRejected) {
  expect_rejected(IdKind::volume, "", "empty");
  expect_rejected(IdKind::plugin, std::string(129, 'x'), "128");
  expect_rejected(IdKind::volume, std::string_view("a\0b", 3), "NUL");
  expect_rejected(IdKind::volume, "a\nb", "control character");
  expect_rejected(IdKind::volume, "a\x7f", "control character");
  expect_rejected(IdKind::volume, "a b", "' '");
  expect_rejected(IdKind::volume, "a%2e", "'%'");
  expect_rejected(IdKind::volume, "caf\xc3\xa9", "non-ASCII");
}

TEST(Ids, ErrorsEscapeControlBytes) {
  auto s = validate_volume_id("a\nb");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().find('\n'), std::string::npos) << s.error();
}

TEST(Ids, PerAllocSuffixOnlyOnVolumeIds) {
  EXPECT_TRUE(validate_volume_id("data[0]").ok());
  EXPECT_TRUE(validate_volume_id("data[12]").ok());
  EXPECT_FALSE(validate_volume_id("data[01]").ok());
  EXPECT_FALSE(validate_volume_id("data[]").ok());
  EXPECT_FALSE(validate_volume_id("data[-1]").ok());
  EXPECT_FALSE(validate_volume_id("da[0]ta").ok());
  EXPECT_FALSE(validate_volume_id("data[0][1]").ok());
  EXPECT_FALSE(validate_volume_id("[0]").ok());
  EXPECT_FALSE(validate_allocation_id("data[0]").ok());
  EXPECT_FALSE(validate_node_id("n[1]").ok());
  EXPECT_EQ(per_alloc_volume_id("data", 3), "data[3]");
  EXPECT_TRUE(validate_volume_id(per_alloc_volume_id("data", 3)).ok());
}

TEST(Ids, NewIdIsAUniqueValidUuidV4) {
  const std::regex uuid("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    auto id = new_id();
    EXPECT_TRUE(std::regex_match(id, uuid)) << id;
    EXPECT_TRUE(validate_allocation_id(id).ok());
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 200u);
}

TEST(Namespaces, NamesAreLettersDigitsAndDashes) {
  EXPECT_TRUE(validate_namespace("default").ok());
  EXPECT_TRUE(validate_namespace("team-A-2").ok());
  EXPECT_EQ(validate_namespace("").error(), "invalid namespace: must not be empty");
  EXPECT_EQ(validate_namespace("a b").error(), "invalid namespace \"a b\": must not contain ' ' (allowed: letters, digits, '-')");
  EXPECT_FALSE(validate_namespace("a:b").ok());
  EXPECT_FALSE(validate_namespace("*").ok());
  EXPECT_FALSE(validate_namespace("a/b").ok());
  EXPECT_FALSE(validate_namespace(std::string(129, 'a')).ok());
}

TEST(Namespaces, AVolumeKeyIsItsIdInDefaultAndNamespaceColonIdElsewhere) {
  EXPECT_EQ(volume_key("default", "data"), "data");
  EXPECT_EQ(volume_key("team-a", "data[2]"), "team-a:data[2]");
  auto plain = split_volume_key("data");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, (VolumeRef{"default", "data"}));
  auto qualified = split_volume_key("team-a:data[2]");
  ASSERT_TRUE(qualified.ok());
  EXPECT_EQ(*qualified, (VolumeRef{"team-a", "data[2]"}));
  // One volume has one key: the default namespace is never written out.
  EXPECT_FALSE(split_volume_key("default:data").ok());
  EXPECT_FALSE(split_volume_key("team a:data").ok());
  EXPECT_FALSE(split_volume_key("team-a:../x").ok());
  EXPECT_FALSE(split_volume_key("a:b:c").ok());
  EXPECT_TRUE(validate_volume_key("team-a:data").ok());
  EXPECT_FALSE(validate_volume_key(":data").ok());
}

}  // namespace
}  // namespace mooring::domain
