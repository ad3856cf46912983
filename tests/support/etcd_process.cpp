#include "tests/support/etcd_process.hpp"

#include "tests/support/files.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

namespace mooring::test {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

bool log_says_ready(const std::filesystem::path& log) {
  return read_file(log).find("ready to serve client requests") != std::string::npos;
}

}  // namespace

// A port the kernel would not hand out by itself: below the ephemeral range (32768 and up on
// Linux), where every outgoing connection of every test running beside this one takes its local
// port. A port picked there and closed again could be taken by such a connection before the process
// meant for it binds it (an etcd member of a three-member cluster failed so in CI). The bind check
// refuses one that is in use now; the set keeps this process from handing the same port out twice.
std::uint16_t free_tcp_port() {
  static std::mutex mutex;
  static std::set<std::uint16_t> handed_out;
  static std::mt19937 random{std::random_device{}()};
  std::lock_guard lock(mutex);
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    if (handed_out.contains(port)) continue;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("free_tcp_port: socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (!free) continue;
    handed_out.insert(port);
    return port;
  }
  throw std::runtime_error("free_tcp_port: no free port between 20000 and 32000 after 200 tries");
}

std::optional<std::string> EtcdProcess::unavailable() {
  if (::access(kEtcd, X_OK) != 0) return std::string("etcd is not installed (apt-get install etcd-server)");
  return std::nullopt;
}

EtcdProcess::EtcdProcess(std::filesystem::path dir, std::uint16_t client_port)
    : dir_(std::move(dir)),
      log_(dir_ / "etcd.log"),
      client_port_(client_port != 0 ? client_port : free_tcp_port()),
      peer_port_(free_tcp_port()) {}

EtcdProcess::EtcdProcess(std::filesystem::path dir, std::string name, std::uint16_t client_port,
                         std::uint16_t peer_port, std::string initial_cluster, std::optional<EtcdTls> tls)
    : dir_(std::move(dir)),
      log_(dir_ / "etcd.log"),
      name_(std::move(name)),
      client_port_(client_port),
      peer_port_(peer_port),
      initial_cluster_(std::move(initial_cluster)),
      tls_(std::move(tls)) {}

EtcdProcess::~EtcdProcess() = default;  // ChildProcess kills and reaps

void EtcdProcess::start() {
  spawn();
  wait_ready();
}

void EtcdProcess::spawn() {
  std::filesystem::create_directories(dir_);
  std::filesystem::remove(log_);
  const std::string client = (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  SpawnOptions o;
  o.binary = kEtcd;
  o.args = {"--name",
            name_,
            "--data-dir",
            (dir_ / "data").string(),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            initial_cluster_.empty() ? name_ + "=" + peer : initial_cluster_,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            "mooring-test"};
  if (tls_)
    o.args.insert(o.args.end(), {"--cert-file", tls_->cert, "--key-file", tls_->key, "--trusted-ca-file", tls_->ca,
                                 "--client-cert-auth"});
  o.output_file = log_;
  process_ = std::make_unique<ChildProcess>(std::move(o));
}

void EtcdProcess::wait_ready() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (log_says_ready(log_)) return;
    if (!process_->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("etcd did not become ready; see " + log_.string());
}

void EtcdProcess::kill() {
  if (!process_) return;
  process_->kill();
  process_->wait_for_exit(std::chrono::seconds(10));
}

bool EtcdProcess::running() const { return process_ && process_->running(); }

std::string EtcdProcess::endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

EtcdCluster::EtcdCluster(std::filesystem::path dir, std::size_t members, std::optional<EtcdTls> tls) {
  std::vector<std::pair<std::uint16_t, std::uint16_t>> ports;
  std::string initial;
  for (std::size_t i = 0; i < members; ++i) {
    ports.emplace_back(free_tcp_port(), free_tcp_port());
    initial += (i ? "," : "") + ("m" + std::to_string(i)) + "=http://127.0.0.1:" + std::to_string(ports[i].second);
  }
  for (std::size_t i = 0; i < members; ++i)
    members_.push_back(std::make_unique<EtcdProcess>(dir / ("m" + std::to_string(i)), "m" + std::to_string(i),
                                                     ports[i].first, ports[i].second, initial, tls));
}

void EtcdCluster::start() {
  for (auto& m : members_) m->spawn();
  for (auto& m : members_) m->wait_ready();
}

void EtcdCluster::start(std::size_t i) { members_.at(i)->start(); }

void EtcdCluster::kill(std::size_t i) { members_.at(i)->kill(); }

std::string EtcdCluster::url(const std::string& prefix) const {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < members_.size(); ++i) out += (i ? "," : "") + members_[i]->endpoint();
  return out + prefix;
}

}  // namespace mooring::test
