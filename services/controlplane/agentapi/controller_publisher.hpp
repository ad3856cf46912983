// The publisher interface moved to the claims room, its consumer; this keeps older includes working.
#pragma once

#include "services/controlplane/claims/controller_publisher.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
