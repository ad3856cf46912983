#include "tests/support/etcd_process.hpp"

#include "tests/support/files.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

namespace mooring::test {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

bool log_says_ready(const std::filesystem::path& log) {
  return read_file(log).find("ready to serve client requests") != std::string::npos;
}

}  // namespace

std::uint16_t free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_tcp_port: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("free_tcp_port: bind failed");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
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

EtcdProcess::~EtcdProcess() = default;  // ChildProcess kills and reaps

void EtcdProcess::start() {
  std::filesystem::create_directories(dir_);
  std::filesystem::remove(log_);
  const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  SpawnOptions o;
  o.binary = kEtcd;
  o.args = {"--name", "m1", "--data-dir", (dir_ / "data").string(),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "m1=" + peer, "--initial-cluster-state", "new"};
  o.output_file = log_;
  process_ = std::make_unique<ChildProcess>(std::move(o));
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

}  // namespace mooring::test
