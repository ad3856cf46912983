// mooring-hostpath: what every RPC passes through before and after its handler: the takeover
// (a call that touches state waits until this copy holds the node's lock), fault injection (fail,
// delay, hang, exit), the call log, and a debug log line.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

#include "plugins/hostpath/call_log.hpp"

namespace grpc {
class ServerContext;
}

namespace mooring::hostpath {

class FaultInjector;
class Takeover;

struct CallInfo {
  std::string_view rpc;
  std::string volume_id;
  std::string node_id;
  std::string path;
  RequestDetail detail = {};  // for the call log only
};

class CallGate {
 public:
  // faults and call_log may be null (feature off). stopping turns hangs and delays short on shutdown.
  // takeover null: every call runs at once (tests of the logic).
  CallGate(FaultInjector* faults, CallLog* call_log, const std::atomic<bool>& stopping, Takeover* takeover = nullptr)
      : faults_(faults), call_log_(call_log), stopping_(stopping), takeover_(takeover) {}

  // `abnormal`: how a successful answer reports an injected abnormal volume condition (only the
  // calls that carry one pass it).
  grpc::Status run(grpc::ServerContext& ctx, const CallInfo& info, const std::function<grpc::Status()>& handler,
                   const std::function<void(const std::string&)>& abnormal = {});

 private:
  FaultInjector* faults_;
  CallLog* call_log_;
  const std::atomic<bool>& stopping_;
  Takeover* takeover_;
};

}  // namespace mooring::hostpath
