#include "shared/tls/cert_files.hpp"

#include <sys/stat.h>

#include "shared/durable/durable_file.hpp"

namespace mooring::tls {

namespace fs = std::filesystem;

std::string base_name(const Identity& identity) {
  if (identity.role == Role::agent) return "agent-" + identity.node_id;
  return std::string(to_string(identity.role));
}

PairPaths ca_paths(const fs::path& dir) { return {dir / "ca.pem", dir / "ca-key.pem"}; }

PairPaths pair_paths(const fs::path& dir, const Identity& identity) {
  const auto base = base_name(identity);
  return {dir / (base + ".pem"), dir / (base + "-key.pem")};
}

Expected<PairPaths> write_pair(const PairPaths& paths, const KeyPair& pair) {
  for (const auto* p : {&paths.cert, &paths.key}) {
    std::error_code ec;
    if (fs::exists(*p, ec)) return domain::error(p->string() + " already exists; remove it first to replace it");
  }
  if (auto key = replace_file(paths.key, pair.key_pem); !key) return domain::error(key.error());
  if (auto cert = replace_file(paths.cert, pair.cert_pem); !cert) return domain::error(cert.error());
  return paths;
}

Expected<fs::path> replace_file(const fs::path& path, std::string_view content) {
  const auto dir = path.parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) return domain::error("cannot create " + dir.string() + ": " + ec.message());
      ::chmod(dir.c_str(), 0700);
    }
  }
  // write_file_atomically creates its temp file 0600 and renames it into place.
  if (auto ec = durable::write_file_atomically(path, content))
    return domain::error("cannot write " + path.string() + ": " + ec.message());
  return path;
}

Expected<std::string> read_text(const fs::path& path) {
  std::error_code ec;
  auto text = durable::read_file(path, ec);
  if (ec) return domain::error("cannot read " + path.string() + ": " + ec.message());
  if (!text) return domain::error(path.string() + " does not exist");
  return std::move(*text);
}

Expected<KeyPair> read_pair(const PairPaths& paths) {
  auto cert = read_text(paths.cert);
  if (!cert) return domain::error(cert.error());
  auto key = read_text(paths.key);
  if (!key) return domain::error(key.error());
  return KeyPair{std::move(*cert), std::move(*key)};
}

Expected<Signed> sign_csr_with(const PairPaths& ca_files, std::string_view csr_pem, const CertRequest& request) {
  auto ca = read_pair(ca_files);
  if (!ca) return domain::error("cannot read the CA: " + ca.error());
  auto cert = sign_csr(*ca, csr_pem, request);
  if (!cert) return domain::error("cannot sign: " + cert.error());
  auto info = inspect(*cert);
  if (!info) return domain::error("cannot read the signed certificate: " + info.error());
  return Signed{std::move(*cert), std::move(ca->cert_pem), std::move(*info)};
}

}  // namespace mooring::tls
