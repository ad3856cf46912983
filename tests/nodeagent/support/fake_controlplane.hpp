// A fake ControlPlane gRPC service for node agent tests: records every RegisterNode and
// Heartbeat it receives, answers known=false on request, and can be taken "down" (UNAVAILABLE)
// or made a standby that names a leader, or none, as an HA control plane's do.
// For allocations it keeps a small allocation table (WatchAllocations long polls on its index,
// UpdateAllocations stores client statuses and events) and a claim table with Nomad's single
// writer rule (ClaimVolume answers FAILED_PRECONDITION "volume max claims reached" while another
// allocation holds a write claim; UnpublishVolume frees the claim).
// Thread-safe: gRPC's sync server threads write, the test thread reads.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "mooring/v1/controlplane.grpc.pb.h"

namespace mooring::nodeagent {

class FakeControlPlane final : public ::mooring::v1::ControlPlane::Service {
 public:
  FakeControlPlane();  // listens on 127.0.0.1 with an OS-chosen port
  ~FakeControlPlane() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  grpc::Status RegisterNode(grpc::ServerContext*, const ::mooring::v1::RegisterNodeRequest* req,
                            ::mooring::v1::RegisterNodeResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const ::mooring::v1::HeartbeatRequest* req,
                         ::mooring::v1::HeartbeatResponse* resp) override;

  grpc::Status WatchAllocations(grpc::ServerContext*, const ::mooring::v1::WatchAllocationsRequest* req,
                                ::mooring::v1::WatchAllocationsResponse* resp) override;
  grpc::Status UpdateAllocations(grpc::ServerContext*, const ::mooring::v1::UpdateAllocationsRequest* req,
                                 ::mooring::v1::UpdateAllocationsResponse* resp) override;
  grpc::Status ClaimVolume(grpc::ServerContext*, const ::mooring::v1::ClaimVolumeRequest* req,
                           ::mooring::v1::ClaimVolumeResponse* resp) override;
  grpc::Status UnpublishVolume(grpc::ServerContext*, const ::mooring::v1::UnpublishVolumeRequest* req,
                               ::mooring::v1::UnpublishVolumeResponse* resp) override;
  grpc::Status RenewCertificate(grpc::ServerContext*, const ::mooring::v1::RenewCertificateRequest* req,
                                ::mooring::v1::RenewCertificateResponse* resp) override;

  // How RenewCertificate answers (UNIMPLEMENTED while unset); called under the fake's lock.
  using RenewAnswer = std::function<grpc::Status(const ::mooring::v1::RenewCertificateRequest&,
                                                 ::mooring::v1::RenewCertificateResponse&)>;
  void on_renew(RenewAnswer answer);

  // Registers a volume agents may claim (what ClaimVolume answers, modes taken from the claim).
  void put_volume(const ::mooring::v1::VolumeMountInfo& volume);
  // Adds or replaces an allocation and wakes the watchers.
  void put_allocation(const ::mooring::v1::Allocation& alloc);
  // desired_status = stop.
  void stop_allocation(const std::string& alloc_id);
  std::optional<::mooring::v1::Allocation> allocation(const std::string& alloc_id) const;
  ::mooring::v1::ClientStatus client_status(const std::string& alloc_id) const;
  std::vector<std::string> event_types(const std::string& alloc_id) const;
  std::vector<::mooring::v1::ClaimVolumeRequest> claims() const;
  std::vector<::mooring::v1::UnpublishVolumeRequest> unpublishes() const;
  // Allocations holding a claim on the volume right now.
  std::vector<std::string> claim_holders(const std::string& volume_id) const;

  // Next heartbeat answers known=false (the control plane forgot the node).
  void forget_node();
  // While down, every call fails with UNAVAILABLE (and is not recorded).
  void set_down(bool down);
  // A standby of an HA control plane: registrations, heartbeats and watches answer UNAVAILABLE
  // naming `leader` (trailer x-mooring-leader), or nobody when it is "" (no leader elected yet).
  // nullopt: the leader, answering.
  void set_standby(std::optional<std::string> leader);
  // What registrations and heartbeats answer: the TTL (10 s by default) and the pace the
  // control plane asks of a large fleet (none by default).
  void set_pace(std::chrono::milliseconds ttl, std::chrono::milliseconds min_interval);
  // The leader epoch registrations and heartbeats name (cluster, revision); nullopt (the default):
  // none, as a leader that does not know its own yet.
  void set_leader_epoch(std::optional<std::pair<std::uint64_t, std::int64_t>> epoch);
  // WatchAllocations calls answered (not refused) so far.
  int watches() const;
  // The next n UnpublishVolume calls fail with UNAVAILABLE (a blip only that call saw).
  void fail_unpublishes(int n);

  std::vector<::mooring::v1::RegisterNodeRequest> registrations() const;
  std::vector<::mooring::v1::HeartbeatRequest> heartbeats() const;
  // Every event received, in order, across heartbeats.
  std::vector<::mooring::v1::NodeEvent> events() const;
  // The plugin's fingerprint in the latest heartbeat that carried it.
  std::optional<::mooring::v1::PluginFingerprint> latest(const std::string& plugin_id) const;
  bool saw_event_containing(const std::string& text) const;

 private:
  std::optional<grpc::Status> as_standby(grpc::ServerContext* ctx) const;  // with mu_ held

  mutable std::mutex mu_;
  RenewAnswer renew_;
  std::vector<::mooring::v1::RegisterNodeRequest> registrations_;
  std::vector<::mooring::v1::HeartbeatRequest> heartbeats_;
  bool forget_ = false;
  bool down_ = false;
  std::optional<std::string> standby_;
  int watches_ = 0;
  int unpublish_failures_ = 0;
  bool registered_ = false;
  std::int64_t ttl_ms_ = 10'000, min_interval_ms_ = 0;
  std::optional<std::pair<std::uint64_t, std::int64_t>> epoch_;
  bool stopping_ = false;
  std::condition_variable cv_;
  uint64_t index_ = 1;
  std::map<std::string, ::mooring::v1::Allocation> allocs_;
  std::map<std::string, std::vector<std::string>> alloc_events_;
  std::map<std::string, ::mooring::v1::VolumeMountInfo> volumes_;
  std::map<std::string, std::map<std::string, bool>> claims_;  // volume -> alloc -> write
  std::vector<::mooring::v1::ClaimVolumeRequest> claim_calls_;
  std::vector<::mooring::v1::UnpublishVolumeRequest> unpublish_calls_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace mooring::nodeagent
