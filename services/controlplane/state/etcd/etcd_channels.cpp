#include "services/controlplane/state/etcd/etcd_channels.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "shared/log/log.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane {
namespace {

using domain::error;

const log::Logger kLog{"etcd-state"};

bool is_ipv4_endpoint(const std::string& e) { return e.find_first_not_of("0123456789.:") == std::string::npos; }

bool unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

domain::Expected<std::shared_ptr<EtcdChannels>> EtcdChannels::make(const EtcdOptions& options) {
  if (options.endpoints.empty()) return error("etcd state: no endpoint");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.ca_file.empty() && options.cert_file.empty() && options.key_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    if (options.ca_file.empty()) return error("etcd state: --etcd-cacert is required with --etcd-cert/--etcd-key");
    if (options.cert_file.empty() != options.key_file.empty())
      return error("etcd state: --etcd-cert and --etcd-key go together");
    grpc::SslCredentialsOptions ssl;
    auto ca = tls::read_text(options.ca_file);
    if (!ca) return error("--etcd-cacert: " + ca.error());
    ssl.pem_root_certs = *ca;
    if (!options.cert_file.empty()) {
      auto cert = tls::read_text(options.cert_file);
      if (!cert) return error("--etcd-cert: " + cert.error());
      auto key = tls::read_text(options.key_file);
      if (!key) return error("--etcd-key: " + key.error());
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  std::shared_ptr<EtcdChannels> out(new EtcdChannels());
  // Plaintext IPv4 endpoints only: one channel over the list. With TLS each member's certificate
  // is checked against the name dialled, and a list's authority is the whole list, which no
  // certificate names ("Peer name 127.0.0.1:4731,127.0.0.1:4741 is not in peer certificate").
  const bool plaintext = options.ca_file.empty();
  if (plaintext && std::all_of(options.endpoints.begin(), options.endpoints.end(), is_ipv4_endpoint)) {
    std::string list = "ipv4:";
    for (std::size_t i = 0; i < options.endpoints.size(); ++i) list += (i ? "," : "") + options.endpoints[i];
    out->targets_.push_back(std::move(list));
  } else {
    for (const auto& e : options.endpoints) out->targets_.push_back("dns:///" + e);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxReceiveBytes));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Also the connect timeout of one address: a member that does not answer SYNs (a dead node)
  // costs a second, not gRPC's default 20, before the next address is tried.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  // Names resolved again at most every second when a connection fails (gRPC's default is 30 s).
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  for (const auto& t : out->targets_) out->channels_.push_back(grpc::CreateCustomChannel(t, creds, args));
  return out;
}

std::shared_ptr<grpc::Channel> EtcdChannels::get() {
  const auto n = channels_.size();
  const auto from = current_.load();
  if (n == 1) return channels_[0];
  // The current endpoint, or the first after it that connects: one gRPC already knows is
  // unreachable is skipped at once, one not connected yet gets a second to connect.
  for (std::size_t step = 0; step < n; ++step) {
    const auto i = (from + step) % n;
    const auto& channel = channels_[i];
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
    auto state = channel->GetState(true);
    while (state == GRPC_CHANNEL_IDLE || state == GRPC_CHANNEL_CONNECTING) {
      if (!channel->WaitForStateChange(state, deadline)) break;
      state = channel->GetState(true);
    }
    if (state != GRPC_CHANNEL_READY) continue;
    if (step > 0) {
      auto expected = from;
      if (current_.compare_exchange_strong(expected, i))
        kLog.info("etcd endpoint unreachable; using the next", {{"from", targets_[from]}, {"to", targets_[i]}});
    }
    return channel;
  }
  return channels_[from];  // none connects: the call fails and says why
}

void EtcdChannels::done(const std::shared_ptr<grpc::Channel>& used, const grpc::Status& status) {
  if (channels_.size() < 2 || !unreachable(status)) return;
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (channels_[i] == used) advance_from(i);
}

bool EtcdChannels::again(const grpc::Status& status, std::size_t attempts) const {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE && attempts < channels_.size();
}

void EtcdChannels::advance_from(std::size_t from) {
  const auto next = (from + 1) % channels_.size();
  auto expected = from;
  // Only the first caller to see `from` fail moves on (others may have moved already).
  if (current_.compare_exchange_strong(expected, next))
    kLog.info("etcd endpoint did not answer; using the next", {{"from", targets_[from]}, {"to", targets_[next]}});
}

}  // namespace mooring::controlplane
