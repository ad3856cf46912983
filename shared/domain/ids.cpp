// Id validation: an allow-list of characters, so anything that could traverse a path, split a
// URL or confuse a log line is rejected before it reaches the store or the file system.
#include "shared/domain/ids.hpp"

#include <cstdio>
#include <random>

namespace mooring::domain {
namespace {

bool allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

std::string describe(char c) {
  if (c == '\0') return "a NUL byte";
  if (c == '/') return "'/'";
  if (c == '\\') return "'\\'";
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u == 0x7f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "control character 0x%02x", u);
    return buf;
  }
  if (u >= 0x80) return "a non-ASCII byte";
  return std::string("'") + c + "'";
}

// Printable form of a rejected id for the error message (control bytes escaped).
std::string printable(std::string_view id) {
  std::string out;
  for (char c : id.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || u >= 0x80 || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (id.size() > 64) out += "...";
  return out;
}

// Length of a trailing "[N]" suffix (N decimal, no leading zeros), or 0 when absent.
std::size_t per_alloc_suffix(std::string_view id) {
  if (id.size() < 3 || id.back() != ']') return 0;
  const auto open = id.rfind('[');
  if (open == std::string_view::npos) return 0;
  const auto digits = id.substr(open + 1, id.size() - open - 2);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
  }
  return id.size() - open;
}

}  // namespace

std::string_view to_string(IdKind kind) {
  switch (kind) {
    case IdKind::volume: return "volume id";
    case IdKind::allocation: return "allocation id";
    case IdKind::node: return "node id";
    case IdKind::plugin: return "plugin id";
  }
  return "id";
}

Status validate_id(IdKind kind, std::string_view id) {
  auto fail = [&](const std::string& why) {
    return error("invalid " + std::string(to_string(kind)) + " \"" + printable(id) + "\": " + why);
  };
  if (id.empty()) return error("invalid " + std::string(to_string(kind)) + ": must not be empty");
  if (id.size() > kMaxIdLength) {
    return fail("longer than " + std::to_string(kMaxIdLength) + " bytes (" + std::to_string(id.size()) + ")");
  }
  std::string_view base = id;
  if (kind == IdKind::volume) base = id.substr(0, id.size() - per_alloc_suffix(id));
  if (base.empty()) return fail("the per-alloc suffix needs a base id");
  if (base == "." || base == "..") return fail("must not be \".\" or \"..\"");
  for (char c : base) {
    if (!allowed(c)) {
      return fail("must not contain " + describe(c) + " (allowed: letters, digits, '.', '_', '-'" +
                  (kind == IdKind::volume ? std::string(", and a trailing \"[N]\")") : std::string(")")));
    }
  }
  return {};
}

Status validate_namespace(std::string_view ns) {
  if (ns.empty()) return error("invalid namespace: must not be empty");
  if (ns.size() > kMaxNamespaceLength)
    return error("invalid namespace \"" + printable(ns) + "\": longer than " + std::to_string(kMaxNamespaceLength) +
                 " bytes");
  for (char c : ns) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok)
      return error("invalid namespace \"" + printable(ns) + "\": must not contain " + describe(c) +
                   " (allowed: letters, digits, '-')");
  }
  return {};
}

std::string volume_key(std::string_view ns, std::string_view id) {
  if (ns.empty() || ns == kDefaultNamespace) return std::string(id);
  std::string key;
  key.reserve(ns.size() + 1 + id.size());
  key.append(ns).append(1, ':').append(id);
  return key;
}

Expected<VolumeRef> split_volume_key(std::string_view key) {
  const auto colon = key.find(':');
  VolumeRef ref{std::string(kDefaultNamespace), std::string(key)};
  if (colon != std::string_view::npos) {
    ref.ns = std::string(key.substr(0, colon));
    ref.id = std::string(key.substr(colon + 1));
    if (auto s = validate_namespace(ref.ns); !s) return error(s.error());
    if (ref.ns == kDefaultNamespace)  // one volume, one key
      return error("invalid volume key \"" + printable(key) + "\": the default namespace is not written out");
  }
  if (auto s = validate_volume_id(ref.id); !s) return error(s.error());
  return ref;
}

Status validate_volume_key(std::string_view key) {
  auto ref = split_volume_key(key);
  if (!ref) return error(ref.error());
  return {};
}

std::string per_alloc_volume_id(std::string_view base, int index) {
  return std::string(base) + "[" + std::to_string(index) + "]";
}

std::string new_id() {
  thread_local std::mt19937_64 rng{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64{seq};
  }()};
  unsigned char b[16];
  for (int i = 0; i < 16; i += 8) {
    const std::uint64_t r = rng();
    for (int k = 0; k < 8; ++k) b[i + k] = static_cast<unsigned char>(r >> (8 * k));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

}  // namespace mooring::domain
