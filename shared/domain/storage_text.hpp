// Domain: the storage JSON's text (to_storage_json(x).dump() of json.hpp, byte for byte) written
// without building nlohmann's DOM: the control plane renders every record a commit changes on its
// io thread, and an allocation carries up to 50 events (json/fields.hpp, "text without a DOM").
#pragma once

#include "shared/domain/allocation.hpp"
#include "shared/domain/event.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

#include <string>

namespace mooring::domain {

std::string to_storage_text(const Volume& v);
std::string to_storage_text(const Plugin& p);
std::string to_storage_text(const Node& n);
std::string to_storage_text(const NodeIdentity& n);
std::string to_storage_text(const Allocation& a);
std::string to_storage_text(const Event& e);

}  // namespace mooring::domain
