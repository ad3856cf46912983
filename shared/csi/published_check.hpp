// Whether a volume is published to a CSI node, as its controller plugin tells. CSI reports the
// published node ids only with LIST_VOLUMES_PUBLISHED_NODES, through ControllerGetVolume
// (GET_VOLUME) or ListVolumes (LIST_VOLUMES). Asked where an unpublish's outcome was lost: the
// control plane's resumed release (gc/claim_gc.cpp, after a failover) and the node agent's
// unpublish cut off by its own restart (rpcserver). The caller makes the calls through its own
// transport, says which answers mean "not reached", and logs the notes.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "csi/v1/csi.pb.h"

namespace mooring::csi {

struct PublishedCheck {
  std::optional<bool> published;   // nullopt: the plugin cannot tell
  std::string unreachable;         // set: no answer (no controller, a timeout): nothing was learnt
  std::vector<std::string> notes;  // why the plugin could not tell, for the caller's log
};

// One answer to a query, as the caller's transport got it.
template <class Response>
struct QueryAnswer {
  bool ok = false;           // the plugin answered OK
  bool unreachable = false;  // not reached: the check ends with `unreachable`
  std::string error;
  Response response;
};

// `get()` -> awaitable<QueryAnswer<ControllerGetVolumeResponse>>, `list(token)` ->
// awaitable<QueryAnswer<ListVolumesResponse>>; each asked only when its capability is there.
template <class Get, class List>
boost::asio::awaitable<PublishedCheck> published_to_node(bool can_get, bool can_list, std::string external_id,
                                                         std::string csi_node_id, Get get, List list) {
  PublishedCheck out;
  auto published_to = [&](const auto& node_ids) {
    out.published = std::find(node_ids.begin(), node_ids.end(), csi_node_id) != node_ids.end();
    return out;
  };
  if (can_get) {
    QueryAnswer<::csi::v1::ControllerGetVolumeResponse> res = co_await get();
    if (res.ok && res.response.has_status()) co_return published_to(res.response.status().published_node_ids());
    if (res.unreachable) {
      out.unreachable = res.error;
      co_return out;
    }
    out.notes.push_back("ControllerGetVolume did not tell the published nodes: " +
                        (res.ok ? std::string("no status in the answer") : res.error));
  }
  if (can_list) {
    std::string token;
    for (int page = 0; page < 1000; ++page) {  // bounded: a plugin that keeps answering the same token
      QueryAnswer<::csi::v1::ListVolumesResponse> res = co_await list(token);
      if (!res.ok) {
        if (res.unreachable) {
          out.unreachable = res.error;
          co_return out;
        }
        out.notes.push_back("ListVolumes failed: " + res.error);
        break;
      }
      for (const auto& entry : res.response.entries())
        if (entry.volume().volume_id() == external_id) co_return published_to(entry.status().published_node_ids());
      token = res.response.next_token();
      if (token.empty()) break;
    }
  }
  if (!can_get && !can_list)
    out.notes.push_back(
        "no healthy controller reports published nodes (LIST_VOLUMES_PUBLISHED_NODES with GET_VOLUME "
        "or LIST_VOLUMES)");
  co_return out;
}

}  // namespace mooring::csi
