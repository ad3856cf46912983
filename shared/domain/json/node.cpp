// JSON tables and codecs for nodes and their events; API output redacts credential-keyed details.
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr Field<NodeEvent> kNodeEvent[] = {
    field<&NodeEvent::time>("Timestamp", kOut),
    field<&NodeEvent::subsystem>("Subsystem", kOut),
    field<&NodeEvent::message>("Message", kOut),
    field<&NodeEvent::details>("Details", kOut, {.redact = true}),
};

constexpr Field<Node> kNode[] = {
    field<&Node::id>("ID", kAll),
    field<&Node::name>("Name", kAll),
    field<&Node::address>("Address", kAll),
    field<&Node::status>("Status", kAll),
    field<&Node::attributes>("Attributes", kOut),
    field<&Node::plugins>("Plugins", kOut),
    field<&Node::split_controllers>("SplitControllers", kOut),
    field<&Node::last_heartbeat>("LastHeartbeat", kAll),
    field<&Node::certificate_expires>("CertificateExpires", kAll),
    field<&Node::certificate_key_sha256>("CertificateKeySHA256", kOut),
    field<&Node::events>("Events", kOut),
    field<&Node::create_index>("CreateIndex", kAll),
    field<&Node::modify_index>("ModifyIndex", kAll),
};

}  // namespace

Table<NodeEvent> fields_of(std::type_identity<NodeEvent>) { return kNodeEvent; }
Table<Node> fields_of(std::type_identity<Node>) { return kNode; }

}  // namespace codec

using codec::json;
using codec::View;

json to_api_json(const Node& n) { return codec::write_object(n, View::api); }
json to_api_stub(const Node& n) { return codec::write_object(n, View::stub); }
json to_storage_json(const Node& n) { return codec::write_object(n, View::storage); }
std::string to_storage_text(const Node& n) { return codec::write_text(n, View::storage); }

Expected<Node> node_from_storage(const json& j) {
  return codec::from_storage<Node>(j, "stored " + codec::object_name("node", j, "ID"), &Node::id);
}

}  // namespace mooring::domain
