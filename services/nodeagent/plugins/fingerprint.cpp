#include "services/nodeagent/plugins/fingerprint.hpp"

#include "shared/csi/capabilities.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/domain/time.hpp"

namespace mooring::nodeagent {
namespace {

namespace v1 = ::mooring::v1;

std::string describe(std::string_view call, const grpc::Status& st) {
  std::string out(call);
  out += " failed: ";
  out += csi::status_text(st);
  return out;
}

}  // namespace

v1::PluginType to_proto(PluginRole role) {
  switch (role) {
    case PluginRole::controller: return v1::PLUGIN_TYPE_CONTROLLER;
    case PluginRole::node: return v1::PLUGIN_TYPE_NODE;
    case PluginRole::monolith: return v1::PLUGIN_TYPE_MONOLITH;
  }
  return v1::PLUGIN_TYPE_UNSPECIFIED;
}

Fingerprinter::Fingerprinter(std::string plugin_id, PluginRole role, std::string alloc_id) : role_(role) {
  last_.set_plugin_id(std::move(plugin_id));
  last_.set_alloc_id(std::move(alloc_id));
  last_.set_type(to_proto(role));
  last_.set_healthy(false);
  last_.set_health_description("not fingerprinted yet");
}

const v1::PluginFingerprint& Fingerprinter::mark(bool healthy, std::string description) {
  last_.set_healthy(healthy);
  last_.set_health_description(std::move(description));
  last_.set_update_time_ms(domain::to_unix_ms(domain::now()));
  return last_;
}

boost::asio::awaitable<v1::PluginFingerprint> Fingerprinter::fingerprint(PluginClient& client) {
  v1::PluginFingerprint fp = last_;  // keep what we knew if a call fails half-way
  fp.set_update_time_ms(domain::to_unix_ms(domain::now()));
  auto fail = [&](std::string reason) {
    fp.set_healthy(false);
    fp.set_health_description(std::move(reason));
    last_ = fp;
    return fp;
  };

  ::csi::v1::GetPluginInfoResponse info;
  if (auto st = co_await client.get_plugin_info(info); !st.ok()) co_return fail(describe("GetPluginInfo", st));
  csi::apply_plugin_info(info, fp);

  ::csi::v1::GetPluginCapabilitiesResponse caps;
  if (auto st = co_await client.get_plugin_capabilities(caps); !st.ok())
    co_return fail(describe("GetPluginCapabilities", st));
  csi::apply_plugin_capabilities(caps, fp);

  ::csi::v1::ProbeResponse probe;
  if (auto st = co_await client.probe(probe); !st.ok()) co_return fail(describe("Probe", st));
  const bool ready = csi::probe_ready(probe);

  if (role_ == PluginRole::controller || role_ == PluginRole::monolith) {
    ::csi::v1::ControllerGetCapabilitiesResponse ccaps;
    if (auto st = co_await client.controller_get_capabilities(ccaps); !st.ok())
      co_return fail(describe("ControllerGetCapabilities", st));
    *fp.mutable_controller_info() = csi::controller_info(ccaps);
    if (csi::has_group_controller(caps)) {
      ::csi::v1::GroupControllerGetCapabilitiesResponse gcaps;
      if (auto st = co_await client.group_controller_get_capabilities(gcaps); !st.ok())
        co_return fail(describe("GroupControllerGetCapabilities", st));
      csi::apply_group_capabilities(gcaps, *fp.mutable_controller_info());
    }
  }
  if (role_ == PluginRole::node || role_ == PluginRole::monolith) {
    ::csi::v1::NodeGetCapabilitiesResponse ncaps;
    if (auto st = co_await client.node_get_capabilities(ncaps); !st.ok())
      co_return fail(describe("NodeGetCapabilities", st));
    v1::NodeInfo base;
    csi::apply_node_capabilities(ncaps, base);
    ::csi::v1::NodeGetInfoResponse ninfo;
    if (auto st = co_await client.node_get_info(ninfo); !st.ok()) co_return fail(describe("NodeGetInfo", st));
    auto node = csi::node_info(fp.plugin_id(), ninfo, base);
    if (!node) co_return fail(node.error());
    *fp.mutable_node_info() = std::move(node.value());
  }

  if (!ready) co_return fail("Probe: plugin reports not ready");
  fp.set_healthy(true);
  fp.set_health_description("healthy");
  last_ = fp;
  co_return fp;
}

}  // namespace mooring::nodeagent
