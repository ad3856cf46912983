#include "shared/domain/modes.hpp"
#include <gtest/gtest.h>
namespace mooring::domain { TEST(X, Y) { EXPECT_EQ(to_string(AccessMode::single_node_writer), "single-node-writer"); } }
