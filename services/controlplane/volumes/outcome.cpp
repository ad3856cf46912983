#include "services/controlplane/volumes/outcome.hpp"

#include <stdexcept>

#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::volumes {

Failure from_refusal(const Refusal& r) {
  switch (r.kind) {
    case Refusal::Kind::invalid: return {Failure::Kind::invalid, r.message};
    case Refusal::Kind::not_found: return {Failure::Kind::not_found, r.message};
    case Refusal::Kind::conflict:
    case Refusal::Kind::unavailable: return {Failure::Kind::conflict, r.message};
  }
  return {Failure::Kind::conflict, r.message};
}

Failure invalid(std::string message) { return {Failure::Kind::invalid, std::move(message)}; }

Failure missing(std::string_view kind, std::string_view id) {
  return {Failure::Kind::not_found, std::string(kind) + " not found: " + std::string(id)};
}

Failure missing_volume(std::string_view key) {
  auto ref = domain::split_volume_key(key);
  if (!ref) return missing("volume", key);
  return {Failure::Kind::not_found, "volume not found" + domain::in_namespace(ref->ns) + ": " + ref->id};
}

Failure conflict(std::string message) { return {Failure::Kind::conflict, std::move(message)}; }

Failure write_failed(std::string_view what, const std::string& error) {
  log::Logger("volumes").error("state write failed", {{"what", what}, {"error", error}});
  return {Failure::Kind::state_write, std::string(what) + ": state write failed: " + error};
}

Failure::Kind kind_of(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return Failure::Kind::invalid;
    case grpc::StatusCode::NOT_FOUND: return Failure::Kind::not_found;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION: return Failure::Kind::conflict;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: return Failure::Kind::forbidden;
    case grpc::StatusCode::UNIMPLEMENTED: return Failure::Kind::unimplemented;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Failure::Kind::timeout;
    case grpc::StatusCode::UNAVAILABLE: return Failure::Kind::unavailable;
    default: return Failure::Kind::plugin_error;
  }
}

void throw_exception_from_error(const Failure& f, const boost::source_location&) {
  throw std::logic_error("volumes::Outcome::value() on a failure: " + f.message);
}

}  // namespace mooring::controlplane::volumes
