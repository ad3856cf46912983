// Volumes room: a volume as it is shown, with the derived fields Nomad shows (its plugin's
// current controller and node counts, whether it can be scheduled).
#pragma once

#include "shared/domain/volume.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::volumes {

domain::Volume decorated(const domain::Volume& v, const StateStore& store);

}  // namespace mooring::controlplane::volumes
