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

constexpr Field<DrainStrategy> kDrainStrategy[] = {
    field<&DrainStrategy::deadline>("Deadline", kOut),
    field<&DrainStrategy::started>("StartedAt", kOut),
    field<&DrainStrategy::force_deadline>("ForceDeadline", kOut),
    field<&DrainStrategy::ignore_system_jobs>("IgnoreSystemJobs", kOut),
};

constexpr Field<DrainStatus> kDrainStatus[] = {
    field<&DrainStatus::status>("Status", kOut),     field<&DrainStatus::started>("StartedAt", kOut),
    field<&DrainStatus::updated>("UpdatedAt", kOut), field<&DrainStatus::allocations_left>("AllocationsLeft", kOut),
    field<&DrainStatus::message>("Message", kOut),
};

// Nomad's spelling: "eligible" or "ineligible".
json eligibility_json(const bool& eligible, View) { return eligible ? "eligible" : "ineligible"; }
void read_eligibility(Reader& r, std::string_view key, bool& eligible) {
  std::string text = eligible ? "eligible" : "ineligible";
  r.str(key, text);
  if (text != "eligible" && text != "ineligible")
    return r.fail(key, "must be \"eligible\" or \"ineligible\", got \"" + text + "\"");
  eligible = text == "eligible";
}

// Nomad's Drain flag: a drain runs.
json drain_json(const Node& n) { return n.drain.has_value(); }

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
    custom<&Node::eligible, eligibility_json, read_eligibility>("SchedulingEligibility", kAll),
    derived<Node, drain_json>("Drain", kAll ^ kStore),
    field<&Node::drain>("DrainStrategy", kOut | kStub),
    field<&Node::last_drain>("LastDrain", kOut),
    field<&Node::create_index>("CreateIndex", kAll),
    field<&Node::modify_index>("ModifyIndex", kAll),
};

}  // namespace

Table<NodeEvent> fields_of(std::type_identity<NodeEvent>) { return kNodeEvent; }
Table<DrainStrategy> fields_of(std::type_identity<DrainStrategy>) { return kDrainStrategy; }
Table<DrainStatus> fields_of(std::type_identity<DrainStatus>) { return kDrainStatus; }
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
