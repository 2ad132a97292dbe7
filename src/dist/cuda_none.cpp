// A build without CUDA: what src/dist does on CUDA devices is refused with the reason.
#include "core/check.hpp"
#include "dist/host_staging.hpp"
#include "dist/rank_scratch.hpp"

namespace qmoe {

HostStaged::HostStaged(TensorView t, void* stream, Contents)
    : original_(t), host_(t), stream_(stream) {
  check(t.device().kind == DeviceKind::cpu, "{} is CUDA memory, but qmoe was built without CUDA",
        t.describe());
}

void HostStaged::write_back() const {}

std::unique_ptr<RankScratch> cuda_rank_scratch(const MoEConfig&, const ShardPlan&, int rank,
                                               int device) {
  fail("ShardedMoE rank {} on cuda:{}: qmoe was built without CUDA", rank, device);
}

}  // namespace qmoe
