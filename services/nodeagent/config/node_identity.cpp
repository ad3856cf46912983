#include "services/nodeagent/config/node_identity.hpp"

#include <array>
#include <cstdio>
#include <random>

#include "shared/durable/durable_file.hpp"

namespace mooring::nodeagent {

std::string generate_uuid_v4() {
  std::random_device rd;
  std::array<unsigned char, 16> b{};
  for (size_t i = 0; i < b.size(); i += 4) {
    const auto r = rd();
    for (size_t j = 0; j < 4; ++j) b[i + j] = static_cast<unsigned char>(r >> (8 * j));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

std::string load_or_create_node_id(const std::filesystem::path& data_dir, std::error_code& ec) {
  const auto path = data_dir / "node-id";
  auto existing = durable::read_file(path, ec);
  if (ec) return {};
  if (existing) {
    while (!existing->empty() && (existing->back() == '\n' || existing->back() == ' ')) existing->pop_back();
    if (!existing->empty()) return *existing;
  }
  const auto id = generate_uuid_v4();
  ec = durable::write_file_atomically(path, id + "\n");
  if (ec) return {};
  return id;
}

}  // namespace mooring::nodeagent
