// JSON table and codecs for the event table's rows; API output redacts credential-keyed details.
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr Field<Event> kEvent[] = {
    field<&Event::index>("Index", kOut),
    field<&Event::time>("Time", kOut),
    field<&Event::topic>("Topic", kOut),
    field<&Event::type>("Type", kOut),
    field<&Event::ns>("Namespace", kOut),
    field<&Event::key>("Key", kOut),
    field<&Event::message>("Message", kOut),
    field<&Event::details>("Details", kOut, {.redact = true}),
    field<&Event::monotonic_ns>("MonotonicNs", kOut),
};

}  // namespace

Table<Event> fields_of(std::type_identity<Event>) { return kEvent; }

}  // namespace codec

using codec::json;

json to_api_json(const Event& e) { return codec::write_object(e, codec::View::api); }
json to_storage_json(const Event& e) { return codec::write_object(e, codec::View::storage); }
std::string to_storage_text(const Event& e) { return codec::write_text(e, codec::View::storage); }

Expected<Event> event_from_storage(const json& j) { return codec::from_storage<Event>(j, "stored event"); }

}  // namespace mooring::domain
