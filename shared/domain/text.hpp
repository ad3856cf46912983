// Domain: how messages name things. Every refusal and event quotes ids the same way:
// volume "data", node "node-1". (Not `quoted`: std::quoted wins by ADL for a std::string.)
#pragma once

#include <string>
#include <string_view>

namespace mooring::domain {

inline std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

// "" in the default namespace, else ` in namespace "ns"`: appended where a message names a volume
// or an allocation, so messages about the default namespace read as they always did.
inline std::string in_namespace(std::string_view ns) {
  if (ns.empty() || ns == "default") return {};
  return " in namespace " + in_quotes(ns);
}

// Lower-case hex of raw bytes (digests, MACs, random ids).
inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

// A NUL byte would cut `text` short where it becomes a C string (argv, environment, a path, a
// plugin's fields), so API input refuses it.
inline bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. What
// the API takes as text must be this, since JSON answers, the audit log and protobuf strings
// (every CSI call) need it.
bool valid_utf8(std::string_view text);
// The length of `text`'s longest well-formed UTF-8 prefix (text.size() when all of it is).
std::size_t utf8_prefix(std::string_view text);

}  // namespace mooring::domain
