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

FakeControlPlane::~FakeControlPlane() { server_->Shutdown(std::chrono::system_clock::now()); }

grpc::Status FakeControlPlane::RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* req,
                                            v1::RegisterNodeResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down");
  registrations_.push_back(*req);
  registered_ = true;
  resp->set_heartbeat_ttl_ms(10'000);
  return grpc::Status::OK;
}

grpc::Status FakeControlPlane::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                                         v1::HeartbeatResponse* resp) {
  std::lock_guard lock(mu_);
  if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake control plane is down");
  if (forget_ || !registered_) {
    forget_ = false;
    registered_ = false;
    resp->set_known(false);
    return grpc::Status::OK;
  }
  heartbeats_.push_back(*req);
  resp->set_known(true);
  resp->set_heartbeat_ttl_ms(10'000);
  return grpc::Status::OK;
}

void FakeControlPlane::forget_node() {
  std::lock_guard lock(mu_);
  forget_ = true;
}

void FakeControlPlane::set_down(bool down) {
  std::lock_guard lock(mu_);
  down_ = down;
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
