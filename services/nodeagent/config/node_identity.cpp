#include "services/nodeagent/config/node_identity.hpp"

#include "shared/domain/ids.hpp"
#include "shared/durable/durable_file.hpp"

namespace mooring::nodeagent {

std::string load_or_create_node_id(const std::filesystem::path& data_dir, std::error_code& ec) {
  const auto path = data_dir / "node-id";
  auto existing = durable::read_file(path, ec);
  if (ec) return {};
  if (existing) {
    while (!existing->empty() && (existing->back() == '\n' || existing->back() == ' ')) existing->pop_back();
    if (!existing->empty()) return *existing;
  }
  auto id = domain::new_id();
  ec = durable::write_file_atomically(path, id + "\n");
  if (ec) return {};
  return id;
}

}  // namespace mooring::nodeagent
