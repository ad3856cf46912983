// JSON tables and codecs for node identities: storage keeps everything; API output leaves out
// the introduction tokens' secret hashes.
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr Field<NodeCertificate> kNodeCertificate[] = {
    field<&NodeCertificate::serial>("Serial", kOut),
    field<&NodeCertificate::key_sha256>("KeySHA256", kOut),
    field<&NodeCertificate::issued>("Issued", kOut),
    field<&NodeCertificate::expires>("Expires", kOut),
};

constexpr Field<Introduction> kIntroduction[] = {
    field<&Introduction::accessor_id>("AccessorID", kOut),
    field<&Introduction::secret_hash>("SecretHash", kStore),
    field<&Introduction::created_by>("CreatedBy", kOut),
    field<&Introduction::create_time>("CreateTime", kOut),
    field<&Introduction::expiration_time>("ExpirationTime", kOut),
    field<&Introduction::used_time>("UsedTime", kOut),
};

constexpr Field<NodeIdentity> kNodeIdentity[] = {
    field<&NodeIdentity::node_id>("NodeID", kOut),
    field<&NodeIdentity::generation>("Generation", kOut),
    field<&NodeIdentity::current>("Certificate", kOut),
    field<&NodeIdentity::pending>("PendingCertificate", kOut),
    field<&NodeIdentity::previous>("PreviousCertificate", kOut),
    field<&NodeIdentity::previous_until>("PreviousUntil", kOut),
    field<&NodeIdentity::revoked_before>("RevokedBefore", kOut),
    field<&NodeIdentity::introductions>("Introductions", kOut),
    field<&NodeIdentity::create_index>("CreateIndex", kOut),
    field<&NodeIdentity::modify_index>("ModifyIndex", kOut),
};

}  // namespace

Table<NodeCertificate> fields_of(std::type_identity<NodeCertificate>) { return kNodeCertificate; }
Table<Introduction> fields_of(std::type_identity<Introduction>) { return kIntroduction; }
Table<NodeIdentity> fields_of(std::type_identity<NodeIdentity>) { return kNodeIdentity; }

}  // namespace codec

using codec::json;

json to_api_json(const NodeIdentity& n) { return codec::write_object(n, codec::View::api); }
std::string to_storage_text(const NodeIdentity& n) { return codec::write_text(n, codec::View::storage); }

Expected<NodeIdentity> node_identity_from_storage(const json& j) {
  return codec::from_storage<NodeIdentity>(j, "stored " + codec::object_name("node identity", j, "NodeID"),
                                           &NodeIdentity::node_id);
}

}  // namespace mooring::domain
