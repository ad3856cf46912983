// Volumes room: the lifecycle of a volume beyond its claims — register and validate, create
// (undoing a create whose outcome is unknown), delete (resumed until the plugin answers), expand
// then node-expand, snapshots, and the operator's detach. Validate everything first (bad input
// changes nothing and calls no plugin), then the controller call, then one commit. The answers
// are values; the background work (negations, unfinished deletes) runs in this class's task group.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/acl/plugin_objects.hpp"
#include "services/controlplane/volumes/results.hpp"
#include "shared/async/task_group.hpp"
#include "shared/domain/result.hpp"
#include "shared/log/log.hpp"

namespace csi::v1 {  // passed by value, so only declared here (the protos stay out of this header)
class CreateVolumeRequest;
class CreateSnapshotRequest;
class CreateVolumeGroupSnapshotRequest;
class Snapshot;
class DeleteVolumeRequest;
class ControllerExpandVolumeRequest;
class Volume;
}  // namespace csi::v1

namespace mooring::controlplane {
class StateStore;
struct VolumePlan;
}  // namespace mooring::controlplane

namespace mooring::controlplane::volumes {

class ControllerCalls;

class VolumeLifecycle {
 public:
  // Asks the claim GC to retry a volume's release at once (after an operator detach).
  using RetryRelease = std::function<void(const std::string& volume_id)>;

  VolumeLifecycle(boost::asio::any_io_executor executor, StateStore& store, ControllerCalls& controller,
                  RetryRelease retry_release = {});
  ~VolumeLifecycle();
  VolumeLifecycle(const VolumeLifecycle&) = delete;
  VolumeLifecycle& operator=(const VolumeLifecycle&) = delete;

  // Resumes, in the background, the deletes whose outcome was unknown when the process stopped
  // (volumes still marked Deleting).
  void start();
  // Cancels the background negations and deletes, and waits for them.
  boost::asio::awaitable<void> stop();

  // The coroutines take their arguments by value: they may outlive the caller's temporaries.
  // ---- register.cpp: every volume registered in one transaction, or none ----
  // A volume new to the store, or an update that changes what its plugin is told (capabilities,
  // mount options, context, secrets), is first checked by the plugin (validate.cpp). An external
  // id another volume registers is refused (409), naming that volume only to a reader of its namespace.
  boost::asio::awaitable<Outcome<Written>> register_volumes(std::vector<domain::Volume> volumes, Asker asker);
  // One volume: a re-registration that raises RequestedCapacityMin above the capacity expands it
  // (expand.cpp); `header_secrets` are only read then.
  boost::asio::awaitable<Outcome<Written>> register_or_expand(domain::Volume wanted,
                                                              domain::Expected<StringMap> header_secrets, Asker asker);
  // `key`: domain::volume_key(ns, id), here and in remove() and detach().
  Outcome<Deregistered> deregister(const std::string& key, bool force, bool purge);

  // ---- modify.cpp: ControllerModifyVolume of `wanted` mutable parameters (claims/volume_rules.hpp
  // check_modify), with the volume's secrets and then `secrets`; refused (400) when no controller
  // of the plugin supports MODIFY_VOLUME. Every answer the plugin gave is recorded in LastModify.
  boost::asio::awaitable<Outcome<Written>> modify(std::string key, StringMap wanted, StringMap secrets);
  // ---- create.cpp: `v.secrets` already hold the request's secrets ----
  // CloneID and SnapshotID name a source the asker may read (content_source.cpp).
  boost::asio::awaitable<Outcome<Written>> create(domain::Volume v, Asker asker);
  // ---- delete.cpp: the answer is the index of the deregistration ----
  boost::asio::awaitable<Outcome<std::uint64_t>> remove(std::string id, StringMap extra_secrets);
  // ---- detach.cpp ----
  Outcome<Detached> detach(const std::string& id, const std::string& node_id);
  // DELETE /v1/volumes/claim/:id: one claim released in the usual order (node side, then the
  // controller's) by the claim GC; refused (409) while its allocation still runs on a live node.
  Outcome<Detached> release_claim(const std::string& key, const std::string& allocation_id);

  // ---- snapshots.cpp ----
  // Checks one snapshot against the volume and its plugin and merges the secrets (volume, then
  // the request's, then `header_secrets`).
  Outcome<SnapshotRequest> plan_snapshot(SnapshotRequest wanted, const StringMap& header_secrets) const;
  // Each created snapshot is recorded with its source volume's namespace (state/snapshot_record.hpp).
  boost::asio::awaitable<SnapshotsCreated> create_snapshots(std::vector<SnapshotRequest> planned);
  // Needs csi-write-volume in the snapshot's namespace (operator:write when nobody owns it).
  boost::asio::awaitable<Outcome<std::uint64_t>> delete_snapshot(std::string plugin_id, std::string snapshot_id,
                                                                 StringMap secrets, Asker asker);
  // The snapshots the asker may list in `asker.ns` (acl::lists), each with its owner.
  boost::asio::awaitable<Outcome<Page<Snapshot>>> list_snapshots(std::string plugin_id, PageRequest page,
                                                                 StringMap secrets, Asker asker);
  // ---- stats.cpp: every node with a taken claim polls NodeGetVolumeStats now; the answers are
  // recorded per claim as heartbeats record them (events on condition changes). A node that does
  // not answer keeps its last report. The index of the last write (the current one when nothing
  // changed).
  boost::asio::awaitable<Outcome<std::uint64_t>> refresh_stats(std::string key);
  // ---- group_snapshots.cpp: several volumes snapshotted together (CSI GroupController) ----
  // Every volume must exist in `wanted.ns`, not be being deleted, and belong to one plugin whose
  // controller supports group snapshots; the secrets are the volumes' (in order), then the
  // request's, then `header_secrets`.
  Outcome<GroupSnapshotRequest> plan_group_snapshot(GroupSnapshotRequest wanted, const StringMap& header_secrets) const;
  // An uncertain answer (timeout, UNAVAILABLE, ABORTED) is followed by the delete in the background.
  boost::asio::awaitable<Outcome<GroupSnapshot>> create_group_snapshot(GroupSnapshotRequest planned);
  // `snapshot_ids` empty: the group's members as the plugin lists them (ListSnapshots). Needs
  // csi-write-volume in every member's namespace (operator:write for members nobody owns).
  boost::asio::awaitable<Outcome<std::uint64_t>> delete_group_snapshot(std::string plugin_id, std::string group_id,
                                                                       std::vector<std::string> snapshot_ids,
                                                                       StringMap secrets, Asker asker);
  // The groups among the plugin's snapshots (members carry their group's id) whose every member
  // the asker may list; a group it may not is not found.
  boost::asio::awaitable<Outcome<std::vector<GroupSnapshot>>> list_group_snapshots(std::string plugin_id,
                                                                                   StringMap secrets, Asker asker);
  boost::asio::awaitable<Outcome<GroupSnapshot>> get_group_snapshot(std::string plugin_id, std::string group_id,
                                                                    StringMap secrets, Asker asker);

  // ---- external.cpp: the plugin's own listing, the entries the asker may list (acl::lists) ----
  boost::asio::awaitable<Outcome<Page<ExternalVolume>>> list_external(std::string plugin_id, PageRequest page,
                                                                      Asker asker);

 private:
  // register.cpp: what each volume of a registration would be stored as, or why not.
  Outcome<std::vector<VolumePlan>> plan_registrations(std::vector<domain::Volume> volumes,
                                                      const acl::Acl& reader) const;
  // validate.cpp: ControllerValidateVolumeCapabilities for each requested capability through a
  // healthy controller. Skipped for a plugin without a controller (as Nomad), or when nothing the
  // plugin is told changed from `existing`. Unsupported (no `confirmed`) or an unknown external
  // id: invalid (400); no healthy controller: unavailable (503), since storing a volume nobody
  // checked would only fail at its first claim; UNIMPLEMENTED: registered unchecked.
  boost::asio::awaitable<std::optional<Failure>> validate_capabilities(const domain::Volume* existing,
                                                                       domain::Volume planned);

  // expand.cpp
  boost::asio::awaitable<Outcome<Written>> expand(domain::Volume wanted, const StringMap& secrets);
  boost::asio::awaitable<std::vector<std::string>> expand_on_nodes(const domain::Volume& wanted,
                                                                   const ::csi::v1::ControllerExpandVolumeRequest& csi,
                                                                   const StringMap& secrets);
  Outcome<Written> record_expansion(const domain::Volume& wanted, std::int64_t capacity, bool node_expansion,
                                    const std::vector<std::string>& node_errors);

  // detach.cpp: what an operator's release is recorded as (the event's type and message).
  struct Why {
    std::string event;
    std::string message;
  };
  Outcome<Detached> release_claims(const std::string& key, const std::string& node_id,
                                   const std::vector<std::string>& allocs, const Why& why);

  // modify.cpp: the answer on the volume (and its parameters when applied), with an event.
  Outcome<std::uint64_t> record_modify(const std::string& key, const StringMap& wanted, std::string_view state,
                                       const std::string& error);

  // create.cpp
  std::optional<Failure> check_create(const domain::Volume& v) const;
  Outcome<Written> register_created(const domain::Volume& v, const ::csi::v1::Volume& created,
                                    const std::string& controller_node, const acl::Acl& reader);
  // content_source.cpp: CloneID and SnapshotID as the plugin knows them, once the asker may read
  // what each names (a volume here, a recorded snapshot, or, with operator:write, a plugin id
  // nothing here names).
  boost::asio::awaitable<Outcome<ContentSource>> content_source(domain::Volume v, Asker asker);
  // ownership.cpp: a snapshot's owner by its record, else by its source as the plugin lists it
  // (one ListSnapshots by id); nobody's when the plugin cannot list snapshots or has no such one.
  boost::asio::awaitable<Outcome<acl::Owner>> snapshot_owner_at(std::string plugin_id, std::string snapshot_id,
                                                                StringMap secrets);
  // Undo a create whose outcome is unknown: the same request again (idempotent on its name, and
  // a plugin refuses one without its capabilities) tells what exists, which is then deleted.
  boost::asio::awaitable<void> negate_create(std::string plugin_id, std::string volume_key,
                                             ::csi::v1::CreateVolumeRequest request);
  // A created volume that could not be registered is deleted again in the background, unless
  // it is the same volume a concurrent create registered or another registered volume's.
  void abandon_created(const domain::Volume& v, const std::string& external_id);
  // The volume `key` is registered with this provider id (a concurrent create of the same id won).
  bool registered_as(const std::string& key, const std::string& external_id) const;
  // Some registered volume holds this backend volume (the plugin's provider + external id): its
  // storage is never deleted to undo a create.
  bool held_by_a_volume(const std::string& plugin_id, const std::string& external_id) const;

  // delete.cpp: the volume is marked Deleting before DeleteVolume is sent
  std::optional<Failure> check_delete(const std::string& id) const;
  // Sets or clears the mark; clearing records why (the plugin's refusal) in an event.
  domain::Expected<std::uint64_t> mark_deleting(const std::string& id, bool deleting,
                                                const std::string& refused_because);
  // The plugin deleted it: deregister with a VolumeDeleted event.
  domain::Expected<std::uint64_t> deregister_deleted(const std::string& id, const std::string& plugin_id);
  // Retries DeleteVolume in the background until the plugin gives a final answer (at most one
  // task per volume).
  void finish_delete_later(const std::string& plugin_id, const std::string& id, ::csi::v1::DeleteVolumeRequest request);
  boost::asio::awaitable<void> finish_delete(std::string plugin_id, std::string id,
                                             ::csi::v1::DeleteVolumeRequest request);

  // snapshots.cpp
  boost::asio::awaitable<void> negate_snapshot(std::string plugin_id, ::csi::v1::CreateSnapshotRequest request);

  // group_snapshots.cpp
  boost::asio::awaitable<void> negate_group_snapshot(std::string plugin_id,
                                                     ::csi::v1::CreateVolumeGroupSnapshotRequest request);
  // Every snapshot of the plugin, all pages.
  boost::asio::awaitable<Outcome<std::vector<::csi::v1::Snapshot>>> all_snapshots(const std::string& plugin_id,
                                                                                  const StringMap& secrets);

  StateStore& store_;
  ControllerCalls& controller_;
  RetryRelease retry_release_;
  std::set<std::string> finishing_;  // volumes with a background delete running
  log::Logger log_{"volumes"};
  async::TaskGroup tasks_;  // last: destroyed first, so no task outlives what it uses
};

}  // namespace mooring::controlplane::volumes
