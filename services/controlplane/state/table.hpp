// State room: the tables of the control plane's state. Claims live inside their volume (one
// write covers a volume and its claims), so a change to a claim is a change to `volumes`.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace mooring::controlplane {

enum class Table { volumes, plugins, nodes, allocations, events };

inline constexpr std::array<Table, 5> kAllTables{Table::volumes, Table::plugins, Table::nodes, Table::allocations,
                                                  Table::events};

// "volumes", "plugins", ...: the storage name.
std::string_view to_string(Table t);
std::optional<Table> parse_table(std::string_view name);

}  // namespace mooring::controlplane
