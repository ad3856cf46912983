// Domain: a tiny value-or-error result for expected failures (bad input, invalid ids, parse
// errors). The error is a human-readable message naming the object and the field.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace mooring::domain {

struct Error {
  std::string message;
};

inline Error error(std::string message) { return Error{std::move(message)}; }

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Reading the value of an error is a bug, hence an exception.
  T& value() & { return check(), std::get<0>(v_); }
  const T& value() const& { return check(), std::get<0>(v_); }
  T&& value() && { return check(), std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const std::string& error() const {
    if (ok()) throw std::logic_error("Expected::error() on a value");
    return std::get<1>(v_).message;
  }

 private:
  void check() const {
    if (!ok()) throw std::logic_error("Expected::value() on an error: " + std::get<1>(v_).message);
  }
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error e) : e_(std::move(e)) {}  // NOLINT

  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const {
    if (ok()) throw std::logic_error("Expected::error() on success");
    return e_->message;
  }

 private:
  std::optional<Error> e_;
};

using Status = Expected<void>;

}  // namespace mooring::domain
