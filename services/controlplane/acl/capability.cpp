#include "services/controlplane/acl/capability.hpp"

namespace mooring::controlplane::acl {

namespace {
constexpr std::array<std::string_view, 8> kNames{"csi-list-volume",  "csi-read-volume", "csi-write-volume",
                                                 "csi-mount-volume", "list-allocs",     "read-alloc",
                                                 "submit-alloc",     "alloc-lifecycle"};
}

std::string_view to_string(Capability c) { return kNames[static_cast<std::size_t>(c)]; }

std::optional<Capability> parse_capability(std::string_view text) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == text) return static_cast<Capability>(i);
  return std::nullopt;
}

std::string_view to_string(Level l) {
  switch (l) {
    case Level::none: return "none";
    case Level::list: return "list";
    case Level::read: return "read";
    case Level::write: return "write";
  }
  return "none";
}

std::string_view to_string(Area a) {
  switch (a) {
    case Area::plugin: return "plugin";
    case Area::node: return "node";
    case Area::operator_: return "operator";
  }
  return "operator";
}

std::string describe(const Need& n) {
  switch (n.kind) {
    case Need::Kind::unset: return "(undeclared)";
    case Need::Kind::anyone: return "nothing";
    case Need::Kind::any_token:
    case Need::Kind::filtered: return "a token";
    case Need::Kind::management: return "management";
    case Need::Kind::capability: return std::string(to_string(n.capability));
    case Need::Kind::area: return std::string(to_string(n.area)) + ":" + std::string(to_string(n.level));
  }
  return "(undeclared)";
}

}  // namespace mooring::controlplane::acl
