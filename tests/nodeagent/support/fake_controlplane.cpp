#include "tests/nodeagent/support/fake_controlplane.hpp"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <stdexcept>

namespace mooring::nodeagent {

namespace v1 = ::mooring::v1;

FakeControlPlane::FakeControlPlane() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("fake control plane could not listen");
}

FakeControlPlane::~FakeControlPlane() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->Shutdown(std::chrono::system_clock::now());
}

namespace {
grpc::Status down_status() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down"); }
}  // namespace

grpc::Status FakeControlPlane::WatchAllocations(grpc::ServerContext* ctx, const v1::WatchAllocationsRequest* req,
                                                v1::WatchAllocationsResponse* resp) {
  std::unique_lock lock(mu_);
  if (down_) return down_status();
  if (auto refused = as_standby(ctx)) return *refused;
  ++watches_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req->wait_ms());
  while (index_ <= req->min_index() && !stopping_ && !down_ && !ctx->IsCancelled() &&
         std::chrono::steady_clock::now() < deadline) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
  if (down_ || stopping_) return down_status();
  resp->set_index(index_);
  for (const auto& [id, a] : allocs_)
    if (a.node_id() == req->node_id()) *resp->add_allocations() = a;
  return grpc::Status::OK;
}

grpc::Status FakeControlPlane::UpdateAllocations(grpc::ServerContext*, const v1::UpdateAllocationsRequest* req,
                                                 v1::UpdateAllocationsResponse*) {
  {
    std::lock_guard lock(mu_);
    if (down_) return down_status();
    for (const auto& u : req->updates()) {
      auto it = allocs_.find(u.alloc_id());
      if (it == allocs_.end()) continue;
      it->second.set_client_status(u.client_status());
      it->second.set_modify_index(++index_);
      for (const auto& e : u.events()) alloc_events_[u.alloc_id()].push_back(e.type());
    }
  }
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status FakeControlPlane::ClaimVolume(grpc::ServerContext*, const v1::ClaimVolumeRequest* req,
                                           v1::ClaimVolumeResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return down_status();
  claim_calls_.push_back(*req);
  auto vol = volumes_.find(req->volume_id());
  if (vol == volumes_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume not found: " + req->volume_id());
  auto& holders = claims_[req->volume_id()];
  const bool write = req->mode() == v1::CLAIM_MODE_WRITE;
  if (write) {
    for (const auto& [alloc, is_write] : holders)
      if (alloc != req->alloc_id() && is_write)
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "volume max claims reached");
  }
  holders[req->alloc_id()] = write;
  auto info = vol->second;
  info.set_access_mode(req->access_mode());
  info.set_attachment_mode(req->attachment_mode());
  info.set_read_only(!write);
  *resp->mutable_volume() = info;
  return grpc::Status::OK;
}

grpc::Status FakeControlPlane::UnpublishVolume(grpc::ServerContext*, const v1::UnpublishVolumeRequest* req,
                                               v1::UnpublishVolumeResponse*) {
  std::lock_guard lock(mu_);
  if (down_) return down_status();
  if (unpublish_failures_ > 0) {
    --unpublish_failures_;
    return down_status();
  }
  unpublish_calls_.push_back(*req);
  claims_[req->volume_id()].erase(req->alloc_id());
  return grpc::Status::OK;
}

void FakeControlPlane::put_volume(const v1::VolumeMountInfo& volume) {
  std::lock_guard lock(mu_);
  volumes_[volume.volume_id()] = volume;
}

void FakeControlPlane::put_allocation(const v1::Allocation& alloc) {
  {
    std::lock_guard lock(mu_);
    auto& a = allocs_[alloc.id()] = alloc;
    a.set_modify_index(++index_);
  }
  cv_.notify_all();
}

void FakeControlPlane::stop_allocation(const std::string& alloc_id) {
  {
    std::lock_guard lock(mu_);
    auto it = allocs_.find(alloc_id);
    if (it == allocs_.end()) return;
    it->second.set_desired_status(v1::DESIRED_STATUS_STOP);
    it->second.set_modify_index(++index_);
  }
  cv_.notify_all();
}

std::optional<v1::Allocation> FakeControlPlane::allocation(const std::string& alloc_id) const {
  std::lock_guard lock(mu_);
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end()) return std::nullopt;
  return it->second;
}

v1::ClientStatus FakeControlPlane::client_status(const std::string& alloc_id) const {
  auto a = allocation(alloc_id);
  return a ? a->client_status() : v1::CLIENT_STATUS_UNSPECIFIED;
}

std::vector<std::string> FakeControlPlane::event_types(const std::string& alloc_id) const {
  std::lock_guard lock(mu_);
  auto it = alloc_events_.find(alloc_id);
  return it == alloc_events_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<v1::ClaimVolumeRequest> FakeControlPlane::claims() const {
  std::lock_guard lock(mu_);
  return claim_calls_;
}

std::vector<v1::UnpublishVolumeRequest> FakeControlPlane::unpublishes() const {
  std::lock_guard lock(mu_);
  return unpublish_calls_;
}

std::vector<std::string> FakeControlPlane::claim_holders(const std::string& volume_id) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  auto it = claims_.find(volume_id);
  if (it != claims_.end())
    for (const auto& [alloc, _] : it->second) out.push_back(alloc);
  return out;
}

std::optional<grpc::Status> FakeControlPlane::as_standby(grpc::ServerContext* ctx) const {
  if (!standby_) return std::nullopt;
  if (standby_->empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane: no leader yet");
  ctx->AddTrailingMetadata("x-mooring-leader", *standby_);
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane: a standby; the leader is " + *standby_);
}

grpc::Status FakeControlPlane::RegisterNode(grpc::ServerContext* ctx, const v1::RegisterNodeRequest* req,
                                            v1::RegisterNodeResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down");
  if (auto refused = as_standby(ctx)) return *refused;
  registrations_.push_back(*req);
  registered_ = true;
  resp->set_heartbeat_ttl_ms(ttl_ms_);
  resp->set_heartbeat_min_interval_ms(min_interval_ms_);
  if (epoch_) {
    resp->mutable_leader_epoch()->set_cluster_id(epoch_->first);
    resp->mutable_leader_epoch()->set_revision(epoch_->second);
  }
  return grpc::Status::OK;
}

grpc::Status FakeControlPlane::RenewCertificate(grpc::ServerContext*, const v1::RenewCertificateRequest* req,
                                                v1::RenewCertificateResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down");
  if (!renew_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no renewal in this fake");
  return renew_(*req, *resp);
}

void FakeControlPlane::on_renew(RenewAnswer answer) {
  std::lock_guard lock(mu_);
  renew_ = std::move(answer);
}

grpc::Status FakeControlPlane::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                         v1::HeartbeatResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down");
  if (auto refused = as_standby(ctx)) return *refused;
  if (forget_ || !registered_) {
    forget_ = false;
    registered_ = false;
    resp->set_known(false);
    return grpc::Status::OK;
  }
  heartbeats_.push_back(*req);
  resp->set_known(true);
  resp->set_heartbeat_ttl_ms(ttl_ms_);
  resp->set_heartbeat_min_interval_ms(min_interval_ms_);
  if (epoch_) {
    resp->mutable_leader_epoch()->set_cluster_id(epoch_->first);
    resp->mutable_leader_epoch()->set_revision(epoch_->second);
  }
  return grpc::Status::OK;
}

void FakeControlPlane::set_pace(std::chrono::milliseconds ttl, std::chrono::milliseconds min_interval) {
  std::lock_guard lock(mu_);
  ttl_ms_ = ttl.count();
  min_interval_ms_ = min_interval.count();
}

void FakeControlPlane::set_leader_epoch(std::optional<std::pair<std::uint64_t, std::int64_t>> epoch) {
  std::lock_guard lock(mu_);
  epoch_ = epoch;
}

void FakeControlPlane::forget_node() {
  std::lock_guard lock(mu_);
  forget_ = true;
}

void FakeControlPlane::fail_unpublishes(int n) {
  std::lock_guard lock(mu_);
  unpublish_failures_ = n;
}

void FakeControlPlane::set_standby(std::optional<std::string> leader) {
  std::lock_guard lock(mu_);
  standby_ = std::move(leader);
}

int FakeControlPlane::watches() const {
  std::lock_guard lock(mu_);
  return watches_;
}

void FakeControlPlane::set_down(bool down) {
  {
    std::lock_guard lock(mu_);
    down_ = down;
  }
  cv_.notify_all();
}

std::vector<v1::RegisterNodeRequest> FakeControlPlane::registrations() const {
  std::lock_guard lock(mu_);
  return registrations_;
}

std::vector<v1::HeartbeatRequest> FakeControlPlane::heartbeats() const {
  std::lock_guard lock(mu_);
  return heartbeats_;
}

std::vector<v1::NodeEvent> FakeControlPlane::events() const {
  std::lock_guard lock(mu_);
  std::vector<v1::NodeEvent> out;
  for (const auto& hb : heartbeats_) out.insert(out.end(), hb.events().begin(), hb.events().end());
  return out;
}

std::optional<v1::PluginFingerprint> FakeControlPlane::latest(const std::string& plugin_id) const {
  std::lock_guard lock(mu_);
  for (auto it = heartbeats_.rbegin(); it != heartbeats_.rend(); ++it) {
    for (const auto& fp : it->plugins()) {
      if (fp.plugin_id() == plugin_id) return fp;
    }
  }
  return std::nullopt;
}

bool FakeControlPlane::saw_event_containing(const std::string& text) const {
  for (const auto& e : events()) {
    if (e.message().find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace mooring::nodeagent
