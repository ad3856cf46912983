// State room: the connection to etcd that the backend and the leader election share. Every
// endpoint of `--state etcd://a:2379,b:2379,c:2379/prefix` is used, and every address each name
// resolves to:
//   - all endpoints IP addresses: one gRPC channel over the list (pick_first, tried in order);
//   - otherwise one channel per endpoint, a name through gRPC's DNS resolver (every address of the
//     name, tried in turn, resolved again when they fail: a Kubernetes headless Service or a
//     StatefulSet pod that came back with a new IP). Calls use the current channel while it
//     connects; one that cannot (known unreachable, or not connected within a second) is passed
//     over for the next, and a call that found its member unreachable (UNAVAILABLE,
//     DEADLINE_EXCEEDED) makes the next call start from the next endpoint.
// Names are resolved with getaddrinfo (GRPC_DNS_RESOLVER=native, set by main), as every other
// program on the host resolves them (/etc/hosts, nsswitch).
// Thread-safe: the backend and the election call it from their own threads.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "services/controlplane/state/etcd/etcd_options.hpp"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace mooring::controlplane {

class EtcdChannels {
 public:
  // The largest answer we accept from etcd. The backend's load reads in pages well under it.
  static constexpr std::size_t kMaxReceiveBytes = 64 * 1024 * 1024;

  // TLS from the options' files (an error names the file), the channels as above.
  static domain::Expected<std::shared_ptr<EtcdChannels>> make(const EtcdOptions& options);

  // The channel for the next call (may wait up to a second per endpoint that does not connect).
  std::shared_ptr<grpc::Channel> get();
  // What a call on `used` (from get()) answered: a member that cannot be reached makes the next
  // call go to the next endpoint.
  void done(const std::shared_ptr<grpc::Channel>& used, const grpc::Status& status);

  // One call through a fresh stub of `Service` on the current endpoint. A call that found its
  // member gone (UNAVAILABLE: a connection that broke under it) is made again on the next
  // endpoint, once per endpoint. Safe for every request we send: reads and keep-alives repeat
  // freely, and each Txn compares revisions, so one that did commit fails the compare the second
  // time (the caller reloads, as after any failed write) instead of applying twice.
  template <class Service, class Call>
  auto call(Call&& call) {
    for (std::size_t attempt = 1;; ++attempt) {
      auto channel = get();
      auto stub = Service::NewStub(channel);
      auto status = call(*stub);
      done(channel, status);
      if (!again(status, attempt)) return status;
    }
  }

  // The gRPC targets, in order ("ipv4:127.0.0.1:1,127.0.0.1:2" or "dns:///etcd-0.etcd:2379", ...).
  const std::vector<std::string>& targets() const { return targets_; }

 private:
  EtcdChannels() = default;
  void advance_from(std::size_t from);
  bool again(const grpc::Status& status, std::size_t attempts) const;
  std::vector<std::string> targets_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::atomic<std::size_t> current_{0};
};

}  // namespace mooring::controlplane
