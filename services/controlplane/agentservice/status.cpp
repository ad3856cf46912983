// How the agent API says no: gRPC codes the node agent acts on (INVALID_ARGUMENT and NOT_FOUND
// are final for it; FAILED_PRECONDITION and UNAVAILABLE are retried).
#include "services/controlplane/agentservice/handlers.hpp"

namespace mooring::controlplane::agentservice {

grpc::Status invalid_argument(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}
grpc::Status not_found(std::string message) { return grpc::Status(grpc::StatusCode::NOT_FOUND, std::move(message)); }
grpc::Status unavailable(std::string message) {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::move(message));
}

grpc::Status to_status(const Refusal& r) {
  switch (r.kind) {
    case Refusal::Kind::invalid: return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, r.message);
    case Refusal::Kind::not_found: return grpc::Status(grpc::StatusCode::NOT_FOUND, r.message);
    case Refusal::Kind::conflict: return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, r.message);
    case Refusal::Kind::unavailable: return grpc::Status(grpc::StatusCode::UNAVAILABLE, r.message);
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, r.message);
}

grpc::Status write_failed(Context& ctx, const std::string& what, const std::string& error) {
  ctx.log.error("state write failed", {{"what", what}, {"error", error}});
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, what + ": the state could not be written: " + error);
}

grpc::Status check_id(domain::IdKind kind, const std::string& id) {
  if (auto st = domain::validate_id(kind, id); !st) return invalid_argument(st.error());
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
