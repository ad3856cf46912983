// Wire: what a node needs to mount a claimed volume (mount info, mount options) <-> mooring.v1.
#include "shared/wire/proto_convert.hpp"
#include "shared/wire/proto_convert_parts.hpp"

namespace mooring::domain {

namespace v1 = ::mooring::v1;

v1::MountOptions to_proto(const MountOptions& m) {
  v1::MountOptions out;
  out.set_fs_type(m.fs_type);
  for (const auto& f : m.mount_flags) out.add_mount_flags(f);
  out.set_group_change_policy(std::string(to_string(m.group_change_policy)));
  return out;
}

MountOptions from_proto(const v1::MountOptions& m) {
  return MountOptions{m.fs_type(), std::vector<std::string>(m.mount_flags().begin(), m.mount_flags().end()),
                      parse_group_change_policy(m.group_change_policy()).value_or(GroupChangePolicy::unset)};
}

v1::VolumeMountInfo mount_info(const Volume& v, const Claim& claim, bool read_only) {
  VolumeMount m;
  m.volume_id = volume_key(v.ns, v.id);
  m.external_id = v.external_id;
  m.plugin_id = v.plugin_id;
  m.secrets = v.secrets;
  m.volume_context = v.context;
  m.publish_context = claim.publish_context;
  m.mount_options = v.mount_options;
  m.access_mode = claim.access_mode;
  m.attachment_mode = claim.attachment_mode;
  m.read_only = read_only;
  return to_proto(m);
}

v1::VolumeMountInfo to_proto(const VolumeMount& m) {
  v1::VolumeMountInfo out;
  out.set_volume_id(m.volume_id);
  out.set_external_id(m.external_id);
  out.set_plugin_id(m.plugin_id);
  fill(out.mutable_secrets(), m.secrets);
  fill(out.mutable_volume_context(), m.volume_context);
  fill(out.mutable_publish_context(), m.publish_context);
  *out.mutable_mount_options() = to_proto(m.mount_options);
  out.set_access_mode(to_proto(m.access_mode));
  out.set_attachment_mode(to_proto(m.attachment_mode));
  out.set_read_only(m.read_only);
  return out;
}

Expected<VolumeMount> from_proto(const v1::VolumeMountInfo& m) {
  const std::string ctx = "volume mount \"" + m.volume_id() + "\"";
  const auto access = from_proto(m.access_mode());
  if (!access || *access == AccessMode::unknown) {
    return error(ctx + ": field \"access_mode\": missing or unknown access mode " + std::to_string(m.access_mode()));
  }
  const auto attachment = from_proto(m.attachment_mode());
  if (!attachment || *attachment == AttachmentMode::unknown) {
    return error(ctx + ": field \"attachment_mode\": missing or unknown attachment mode " +
                 std::to_string(m.attachment_mode()));
  }
  VolumeMount out;
  out.volume_id = m.volume_id();
  out.external_id = m.external_id();
  out.plugin_id = m.plugin_id();
  out.secrets = to_map(m.secrets());
  out.volume_context = to_map(m.volume_context());
  out.publish_context = to_map(m.publish_context());
  out.mount_options = from_proto(m.mount_options());
  out.access_mode = *access;
  out.attachment_mode = *attachment;
  out.read_only = m.read_only();
  return out;
}

}  // namespace mooring::domain
