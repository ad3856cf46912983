#include "plugins/hostpath/call_gate.hpp"

#include "shared/csi/error_table.hpp"

#include <unistd.h>

#include <chrono>
#include <exception>
#include <grpcpp/server_context.h>
#include <thread>

#include "plugins/hostpath/fault_injector.hpp"
#include "plugins/hostpath/takeover.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

const log::Logger kLog{"rpc"};

std::int64_t mono_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool deadline_passed(const grpc::ServerContext& ctx) { return std::chrono::system_clock::now() >= ctx.deadline(); }

}  // namespace

grpc::Status CallGate::run(grpc::ServerContext& ctx, const CallInfo& info, const std::function<grpc::Status()>& handler,
                           const std::function<void(const std::string&)>& abnormal) {
  const auto started = std::chrono::steady_clock::now();
  FaultDecision fault;
  std::int64_t held_ms = 0;

  auto finish = [&](grpc::Status st) {
    const auto ended = std::chrono::steady_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ended - started).count();
    if (call_log_) {
      call_log_->append({std::string(info.rpc), info.volume_id, info.node_id, info.path,
                         static_cast<int>(st.error_code()), st.error_message(), ms, fault.describe(), info.detail,
                         held_ms, mono_ns(started), mono_ns(ended)});
    }
    kLog.debug("rpc", {{"rpc", info.rpc},
                       {"volume_id", info.volume_id},
                       {"node_id", info.node_id},
                       {"code", csi::code_name(st.error_code())},
                       {"message", st.error_message()},
                       {"duration_ms", ms},
                       {"fault", fault.describe()},
                       {"held_ms", held_ms}});
    return st;
  };

  // Before the faults: a held call has not reached the copy that will serve it yet.
  struct Running {
    Takeover* takeover = nullptr;
    ~Running() {
      if (takeover) takeover->done();
    }
  } running;
  if (takeover_ && touches_state(info.rpc)) {
    auto st = takeover_->hold(info.rpc, ctx.deadline(), [&] { return ctx.IsCancelled(); });
    held_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    if (!st.ok()) return finish(st);
    running.takeover = takeover_;
  }
  if (faults_) fault = faults_->decide(info.rpc, info.volume_id);

  // Latency models a slow plugin: the work still happens after the delay even if the caller
  // gave up meanwhile, which is exactly the "uncertain" outcome an orchestrator must handle.
  const auto until = std::chrono::steady_clock::now() + fault.delay;
  while (std::chrono::steady_clock::now() < until && !stopping_) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now(),
                                                                              std::chrono::milliseconds(20)));
  }

  switch (fault.action) {
    case FaultDecision::Action::none: break;
    case FaultDecision::Action::fail: return finish({static_cast<grpc::StatusCode>(fault.code), fault.message});
    case FaultDecision::Action::hang:
      while (!ctx.IsCancelled() && !deadline_passed(ctx) && !stopping_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return finish({deadline_passed(ctx) ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::CANCELLED,
                     "injected fault: " + std::string(info.rpc) + " hung until the call ended"});
    case FaultDecision::Action::exit:
      finish({grpc::StatusCode::UNAVAILABLE, "injected fault: plugin exits"});
      kLog.warn("injected fault: exiting abruptly", {{"rpc", info.rpc}, {"exit_code", fault.exit_code}});
      ::_exit(fault.exit_code);
  }

  try {
    auto st = handler();
    if (st.ok() && fault.abnormal && abnormal) abnormal(*fault.abnormal);
    return finish(st);
  } catch (const std::exception& e) {
    // A bug, not an expected failure: report it as INTERNAL and keep serving.
    kLog.error("handler threw", {{"rpc", info.rpc}, {"error", e.what()}});
    return finish({grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()});
  }
}

}  // namespace mooring::hostpath
