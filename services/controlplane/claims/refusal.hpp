// Claims room: how a rule says no. The kind lets each transport pick its code (HTTP 400/404/409,
// gRPC INVALID_ARGUMENT/NOT_FOUND/FAILED_PRECONDITION/UNAVAILABLE); the message names the volume,
// the field or the allocation involved so the error explains itself.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace mooring::controlplane {

struct Refusal {
  enum class Kind {
    invalid,      // the request itself is wrong (bad field, immutable field changed)
    not_found,    // the object named by the request does not exist
    conflict,     // the current state forbids it (in use, max claims reached)
    unavailable,  // the cluster cannot serve it now (no healthy plugin instances); retryable
  };
  Kind kind;
  std::string message;
};

inline Refusal invalid(std::string m) { return {Refusal::Kind::invalid, std::move(m)}; }
inline Refusal not_found(std::string m) { return {Refusal::Kind::not_found, std::move(m)}; }
inline Refusal conflict(std::string m) { return {Refusal::Kind::conflict, std::move(m)}; }
inline Refusal unavailable(std::string m) { return {Refusal::Kind::unavailable, std::move(m)}; }

// nullopt: allowed.
using Verdict = std::optional<Refusal>;

// A value or a refusal.
template <class T>
class [[nodiscard]] Ruled {
 public:
  Ruled(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Ruled(Refusal r) : v_(std::in_place_index<1>, std::move(r)) {}    // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    if (!ok()) throw std::logic_error("Ruled::value() on a refusal: " + refusal().message);
    return std::get<0>(v_);
  }
  const T& value() const {
    if (!ok()) throw std::logic_error("Ruled::value() on a refusal: " + refusal().message);
    return std::get<0>(v_);
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }
  const Refusal& refusal() const {
    if (ok()) throw std::logic_error("Ruled::refusal() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Refusal> v_;
};

}  // namespace mooring::controlplane
