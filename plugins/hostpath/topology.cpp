#include "plugins/hostpath/topology.hpp"

#include <algorithm>

namespace mooring::hostpath {

using grpc::Status;
using grpc::StatusCode;

bool segments_match(const std::map<std::string, std::string>& want, const std::map<std::string, std::string>& have) {
  for (const auto& [k, v] : want) {
    auto it = have.find(k);
    if (it == have.end() || it->second != v) return false;
  }
  return true;
}

std::map<std::string, std::string> to_map(const csi::v1::Topology& t) {
  return {t.segments().begin(), t.segments().end()};
}

namespace {

std::string describe(const std::map<std::string, std::string>& segs) {
  std::string out = "{";
  for (const auto& [k, v] : segs) out += (out.size() > 1 ? "," : "") + k + "=" + v;
  return out + "}";
}

}  // namespace

Status choose_topology(const csi::v1::TopologyRequirement& req, const std::map<std::string, std::string>& own,
                       const std::vector<NodeRegistration>& nodes,
                       std::vector<std::map<std::string, std::string>>& out) {
  out.clear();
  std::vector<std::map<std::string, std::string>> places;
  if (!own.empty()) places.push_back(own);
  for (const auto& n : nodes) {
    if (!n.topology.empty()) places.push_back(n.topology);
  }
  if (req.requisite().empty() && req.preferred().empty()) {
    if (!own.empty()) out.push_back(own);
    return Status::OK;
  }
  auto reachable = [&](const std::map<std::string, std::string>& want) {
    if (places.empty()) return true;  // nothing known about topology: accept the request
    return std::any_of(places.begin(), places.end(), [&](const auto& have) { return segments_match(want, have); });
  };
  std::vector<std::map<std::string, std::string>> requisite;
  for (const auto& t : req.requisite()) requisite.push_back(to_map(t));
  auto allowed = [&](const std::map<std::string, std::string>& t) {
    return requisite.empty() || std::find(requisite.begin(), requisite.end(), t) != requisite.end();
  };
  for (const auto& t : req.preferred()) {
    auto m = to_map(t);
    if (allowed(m) && reachable(m)) {
      out.push_back(m);
      return Status::OK;
    }
  }
  for (const auto& m : requisite) {
    if (reachable(m)) {
      out.push_back(m);
      return Status::OK;
    }
  }
  std::string want;
  for (const auto& m : requisite.empty() ? std::vector<std::map<std::string, std::string>>{} : requisite)
    want += describe(m) + " ";
  return {StatusCode::RESOURCE_EXHAUSTED,
          "no node in the requested topology " + want + "can reach this plugin's storage"};
}

}  // namespace mooring::hostpath
