// Volumes room: how a lifecycle operation ends. A failure carries a kind that each transport maps
// to its own code (the REST API to an HTTP status) and a message that names the volume, plugin or
// field involved, so the error explains itself without the transport adding to it.
#pragma once

#include <string>
#include <string_view>

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>
#include <grpcpp/support/status.h>

#include "services/controlplane/claims/refusal.hpp"

namespace mooring::controlplane::volumes {

struct Failure {
  enum class Kind {
    invalid,        // the request is wrong (bad field, unsupported by the plugin)
    not_found,      // the volume, plugin or claim named does not exist
    conflict,       // the current state forbids it (in use, being deleted, raced with another write)
    forbidden,      // the plugin refused the credentials
    unimplemented,  // the plugin does not implement the call
    unavailable,    // nothing can serve it now (no healthy controller); retryable
    timeout,        // the plugin did not answer in time
    plugin_error,   // the plugin failed otherwise, or only part of the work was done
    state_write,    // our own durable write failed
  };
  Kind kind;
  std::string message;
};

template <class T>
using Outcome = boost::system::result<T, Failure>;

// A rule's refusal as a failure; "unavailable" from a rule is about this volume's state (409).
Failure from_refusal(const Refusal& r);
Failure invalid(std::string message);
Failure missing(std::string_view kind, std::string_view id);  // "<kind> not found: <id>"
// "volume not found: <id>", naming its namespace outside the default (key: domain::volume_key).
Failure missing_volume(std::string_view key);
Failure conflict(std::string message);
// Logged: a failed write is ours to look into, not the caller's.
Failure write_failed(std::string_view what, const std::string& error);
// The failure kind for a plugin's gRPC status code.
Failure::Kind kind_of(grpc::StatusCode code);

// A controller call that did not succeed; `message` (default: the result's error) is the text.
template <class R>
Failure plugin_failure(const R& r, std::string message = {}) {
  if (message.empty()) message = r.error;
  if (r.no_target) return {Failure::Kind::unavailable, std::move(message)};
  return {kind_of(r.status.error_code()), std::move(message)};
}

// boost::system::result::value() reports an error through this.
[[noreturn]] void throw_exception_from_error(const Failure& f, const boost::source_location& loc);

}  // namespace mooring::controlplane::volumes
