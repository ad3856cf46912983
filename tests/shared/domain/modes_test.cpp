// Mode spellings (Nomad's), parse/to_string round trips and mode facts.
#include "shared/domain/modes.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

template <class E>
void expect_round_trip(std::initializer_list<E> values, std::optional<E> (*parse)(std::string_view)) {
  for (E v : values) {
    auto parsed = parse(to_string(v));
    ASSERT_TRUE(parsed.has_value()) << to_string(v);
    EXPECT_EQ(*parsed, v);
  }
}

TEST(Modes, NomadSpellings) {
  EXPECT_EQ(to_string(AccessMode::single_node_reader_only), "single-node-reader-only");
  EXPECT_EQ(to_string(AccessMode::single_node_writer), "single-node-writer");
  EXPECT_EQ(to_string(AccessMode::multi_node_reader_only), "multi-node-reader-only");
  EXPECT_EQ(to_string(AccessMode::multi_node_single_writer), "multi-node-single-writer");
  EXPECT_EQ(to_string(AccessMode::multi_node_multi_writer), "multi-node-multi-writer");
  EXPECT_EQ(to_string(AttachmentMode::file_system), "file-system");
  EXPECT_EQ(to_string(AttachmentMode::block_device), "block-device");
  EXPECT_EQ(to_string(ClaimState::node_detached), "node-detached");
  EXPECT_EQ(to_string(ClaimState::controller_detached), "controller-detached");
  EXPECT_EQ(to_string(ClaimState::ready_to_free), "ready-to-free");
  EXPECT_EQ(to_string(ClientStatus::lost), "lost");
  EXPECT_EQ(to_string(PluginType::monolith), "monolith");
}

TEST(Modes, EveryValueRoundTrips) {
  expect_round_trip({AccessMode::unknown, AccessMode::single_node_reader_only, AccessMode::single_node_writer,
                     AccessMode::multi_node_reader_only, AccessMode::multi_node_single_writer,
                     AccessMode::multi_node_multi_writer},
                    parse_access_mode);
  expect_round_trip({AttachmentMode::unknown, AttachmentMode::file_system, AttachmentMode::block_device},
                    parse_attachment_mode);
  expect_round_trip({ClaimMode::read, ClaimMode::write}, parse_claim_mode);
  expect_round_trip({ClaimState::taken, ClaimState::unpublishing, ClaimState::node_detached,
                     ClaimState::controller_detached, ClaimState::ready_to_free},
                    parse_claim_state);
  expect_round_trip({DesiredStatus::run, DesiredStatus::stop}, parse_desired_status);
  expect_round_trip({ClientStatus::pending, ClientStatus::running, ClientStatus::complete, ClientStatus::failed,
                     ClientStatus::lost},
                    parse_client_status);
  expect_round_trip({PluginType::controller, PluginType::node, PluginType::monolith}, parse_plugin_type);
  expect_round_trip({NodeStatus::initializing, NodeStatus::ready, NodeStatus::down}, parse_node_status);
}

TEST(Modes, ParseRejectsNearMisses) {
  EXPECT_FALSE(parse_access_mode("single-writer"));
  EXPECT_FALSE(parse_access_mode("SINGLE-NODE-WRITER"));
  EXPECT_FALSE(parse_access_mode("single_node_writer"));
  EXPECT_FALSE(parse_attachment_mode("filesystem"));
  EXPECT_FALSE(parse_claim_mode(""));
  EXPECT_FALSE(parse_claim_state("freed"));
  EXPECT_FALSE(parse_client_status("Running"));
  EXPECT_EQ(parse_access_mode(""), AccessMode::unknown);
}

TEST(Modes, AccessModeFacts) {
  EXPECT_TRUE(is_read_only(AccessMode::single_node_reader_only));
  EXPECT_TRUE(is_read_only(AccessMode::multi_node_reader_only));
  EXPECT_FALSE(is_read_only(AccessMode::multi_node_single_writer));
  EXPECT_TRUE(is_single_node(AccessMode::single_node_writer));
  EXPECT_FALSE(is_single_node(AccessMode::multi_node_multi_writer));
  EXPECT_EQ(max_writers(AccessMode::single_node_reader_only), 0);
  EXPECT_EQ(max_writers(AccessMode::single_node_writer), 1);
  EXPECT_EQ(max_writers(AccessMode::multi_node_single_writer), 1);
  EXPECT_EQ(max_writers(AccessMode::multi_node_multi_writer), -1);
}

TEST(Modes, TerminalStatusesAndPluginHalves) {
  EXPECT_FALSE(is_terminal(ClientStatus::pending));
  EXPECT_FALSE(is_terminal(ClientStatus::running));
  EXPECT_TRUE(is_terminal(ClientStatus::complete));
  EXPECT_TRUE(is_terminal(ClientStatus::failed));
  EXPECT_TRUE(is_terminal(ClientStatus::lost));
  EXPECT_TRUE(has_controller(PluginType::monolith));
  EXPECT_TRUE(has_node(PluginType::monolith));
  EXPECT_FALSE(has_node(PluginType::controller));
  EXPECT_FALSE(has_controller(PluginType::node));
  EXPECT_FALSE(is_past(ClaimState::taken));
  EXPECT_TRUE(is_past(ClaimState::node_detached));
}

}  // namespace
}  // namespace mooring::domain
