#include "services/controlplane/state/open_backend.hpp"

#include <filesystem>
#include <system_error>

#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"

namespace mooring::controlplane {

namespace {

constexpr std::string_view kEtcdScheme = "etcd://";

domain::Status make_data_dir(const std::string& data_dir) {
  std::error_code ec;
  if (std::filesystem::create_directories(data_dir, ec))
    std::filesystem::permissions(data_dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace,
                                 ec);
  if (ec) return domain::error("cannot make the data dir " + data_dir + ": " + ec.message());
  return {};
}

domain::Expected<OpenedBackend> open_etcd(const StateLocation& where) {
  auto options = parse_etcd_url(where.url);
  if (!options) return domain::error(options.error());
  options->ca_file = where.etcd_ca_file;
  options->cert_file = where.etcd_cert_file;
  options->key_file = where.etcd_key_file;
  OpenedBackend out;
  out.etcd = std::make_shared<const EtcdOptions>(*options);
  auto etcd = EtcdBackend::open(std::move(*options));
  if (!etcd) return domain::error(etcd.error());
  out.where = (*etcd)->describe();
  out.shared = etcd->get();
  out.backend = std::move(*etcd);
  if (auto st = make_data_dir(where.data_dir); !st) return domain::error(st.error());
  return out;
}

}  // namespace

bool is_shared_state(std::string_view url) { return url.starts_with(kEtcdScheme); }

domain::Expected<OpenedBackend> open_backend(const StateLocation& where) {
  if (is_shared_state(where.url)) return open_etcd(where);
  auto sqlite = SqliteBackend::open(where.data_dir);
  if (!sqlite) return domain::error(sqlite.error());
  OpenedBackend out;
  out.where = (*sqlite)->path().string();
  out.backend = std::move(*sqlite);
  return out;
}

}  // namespace mooring::controlplane
