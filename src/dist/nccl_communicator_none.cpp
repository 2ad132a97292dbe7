// A build without NCCL: the NCCL factories say why there is none.
#include "core/check.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

[[noreturn]] void no_nccl(const char* what) {
  fail("{}: {}; local_communicators() runs ranks as threads of one process", what, nccl_status());
}

}  // namespace

bool nccl_built() { return false; }

std::string nccl_status() {
#ifdef QMOE_WITH_CUDA
  return "qmoe was built without NCCL: CMake found no nccl.h and libnccl (set NCCL_ROOT to an "
         "NCCL install or the nvidia-nccl wheel's nvidia/nccl folder and rebuild)";
#else
  return "qmoe was built without CUDA, so without NCCL";
#endif
}

NcclUniqueId nccl_unique_id() { no_nccl("nccl_unique_id"); }

std::unique_ptr<Communicator> nccl_communicator(const NcclUniqueId&, int, int, int) {
  no_nccl("nccl_communicator");
}

std::unique_ptr<Communicator> nccl_communicator(void*) { no_nccl("nccl_communicator"); }

std::vector<std::unique_ptr<Communicator>> nccl_communicators(std::span<const int>) {
  no_nccl("nccl_communicators");
}

}  // namespace qmoe
