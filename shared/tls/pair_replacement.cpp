#include "shared/tls/pair_replacement.hpp"

#include "shared/durable/durable_file.hpp"

namespace mooring::tls {

namespace fs = std::filesystem;

namespace {

fs::path next_of(const fs::path& path) { return fs::path(path.string() + ".next"); }

domain::Status rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return domain::error("cannot rename " + from.string() + " to " + to.string() + ": " + ec.message());
  durable::sync_dir(to.parent_path().empty() ? fs::path(".") : to.parent_path());
  return {};
}

}  // namespace

domain::Status replace_pair(const PairPaths& paths, std::string_view key_pem, std::string_view cert_pem, int steps) {
  if (steps < 1) return {};
  if (auto w = replace_file(next_of(paths.key), key_pem); !w) return domain::error(w.error());
  if (steps < 2) return {};
  if (auto w = replace_file(next_of(paths.cert), cert_pem); !w) return domain::error(w.error());
  if (steps < 3) return {};
  if (auto r = rename_into_place(next_of(paths.key), paths.key); !r) return r;
  if (steps < 4) return {};
  return rename_into_place(next_of(paths.cert), paths.cert);
}

domain::Status recover_pair(const PairPaths& paths) {
  auto pair = read_pair(paths);
  if (!pair) return domain::error(pair.error());
  std::error_code ec;
  if (key_matches(pair->cert_pem, pair->key_pem)) {
    // Cut short before its first rename (or done): what is in place is whole.
    fs::remove(next_of(paths.key), ec);
    fs::remove(next_of(paths.cert), ec);
    return {};
  }
  const auto next = read_text(next_of(paths.cert));
  if (next && key_matches(*next, pair->key_pem)) return rename_into_place(next_of(paths.cert), paths.cert);
  return domain::error("the certificate " + paths.cert.string() + " is not for the key " + paths.key.string() +
                       " (and no " + next_of(paths.cert).string() + " is)");
}

}  // namespace mooring::tls
