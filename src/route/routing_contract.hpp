#pragma once
// The one contract every backend keeps for routing input (host copies of it):
//   - every expert id is in 0..E-1 (CUDA backends also take kExpertNotHere, qmoe/shard.hpp);
//   - router logits and top-k weights are finite;
//   - an id may repeat within a token: every slot is computed and weighted on its own, so the
//     expert's output counts once per slot (expert parallelism gives a rank's remote slots id 0
//     and weight 0, src/dist/slice.cpp);
//   - M = 0 is a no-op (MoE::forward returns before any backend runs).
// A violation throws Error naming the token, the slot and what would be valid. Host backends
// check every call (a scan far cheaper than the GEMMs); device backends check when
// routing_checks_on() (QMOE_CHECK_ROUTING=1), because reading device tensors costs a host sync.
#include <cstdint>

namespace qmoe {

// ids i32 [M, k], weights f32 [M, k], E experts. `not_here_ok`: kExpertNotHere (a slot dropped
// because its expert lives on another rank) is valid too, as CUDA backends take it.
void check_routed_input(const int32_t* ids, const float* weights, int64_t M, int64_t k, int64_t E,
                        bool not_here_ok = false);
// logits f32 [M, E].
void check_router_logits(const float* logits, int64_t M, int64_t E);

// True when the environment sets QMOE_CHECK_ROUTING to anything but "" or "0" (read per call).
bool routing_checks_on();

}  // namespace qmoe
