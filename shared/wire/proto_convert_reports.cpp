// Wire: what a node reports besides its plugins (node events, volume stats) <-> mooring.v1.
#include "shared/wire/proto_convert.hpp"
#include "shared/wire/proto_convert_parts.hpp"

namespace mooring::domain {

namespace v1 = ::mooring::v1;

v1::NodeEvent to_proto(const NodeEvent& e) {
  v1::NodeEvent out;
  out.set_time_ms(to_unix_ms(e.time));
  out.set_subsystem(e.subsystem);
  out.set_message(e.message);
  fill(out.mutable_details(), e.details);
  return out;
}

NodeEvent from_proto(const v1::NodeEvent& e) {
  return NodeEvent{from_unix_ms(e.time_ms()), e.subsystem(), e.message(), to_map(e.details())};
}

v1::VolumeStats to_proto(const VolumeStatsReport& r) {
  v1::VolumeStats out;
  out.set_volume_id(r.volume_id);
  out.set_alloc_id(r.alloc_id);
  Time when{};
  if (r.usage) {
    out.set_has_usage(true);
    out.set_bytes_available(r.usage->bytes_available);
    out.set_bytes_total(r.usage->bytes_total);
    out.set_bytes_used(r.usage->bytes_used);
    out.set_inodes_available(r.usage->inodes_available);
    out.set_inodes_total(r.usage->inodes_total);
    out.set_inodes_used(r.usage->inodes_used);
    when = r.usage->update_time;
  }
  if (r.condition) {
    out.set_has_condition(true);
    out.set_abnormal(r.condition->abnormal);
    out.set_message(r.condition->message);
    when = r.condition->update_time;
  }
  out.set_time_ms(to_unix_ms(when));
  if (r.ownership) {
    out.set_has_ownership(true);
    out.set_ownership_group(r.ownership->group);
    out.set_ownership_by(r.ownership->by);
    out.set_ownership_walked(r.ownership->walked);
    out.set_ownership_time_ms(to_unix_ms(r.ownership->update_time));
  }
  return out;
}

VolumeStatsReport from_proto(const v1::VolumeStats& s) {
  VolumeStatsReport out{.volume_id = s.volume_id(), .alloc_id = s.alloc_id()};
  const Time when = from_unix_ms(s.time_ms());
  if (s.has_usage())
    out.usage = VolumeUsage{s.bytes_available(),
                            s.bytes_total(),
                            s.bytes_used(),
                            s.inodes_available(),
                            s.inodes_total(),
                            s.inodes_used(),
                            when};
  if (s.has_condition()) out.condition = VolumeCondition{s.abnormal(), s.message(), when};
  if (s.has_ownership())
    out.ownership = VolumeOwnership{s.ownership_group(), s.ownership_by(), s.ownership_walked(),
                                    from_unix_ms(s.ownership_time_ms())};
  return out;
}

}  // namespace mooring::domain
