// The Communicator over NCCL: each collective is one NCCL call enqueued on the caller's stream.
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_scope.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

void nccl_check(ncclResult_t status, ncclComm_t comm, const char* what) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  fail("NCCL {} failed: {}{}{}", what, ncclGetErrorString(status), detail && *detail ? ": " : "",
       detail ? detail : "");
}

ncclDataType_t nccl_type(const TensorView& t, const char* what) {
  switch (t.dtype()) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    default:
      fail("NCCL {}: {} has dtype {}; the communicator sums f32, bf16 or f16", what, t.describe(),
           name(t.dtype()));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
    nccl_check(ncclCommUserRank(comm, &rank_), comm, "ncclCommUserRank");
    nccl_check(ncclCommCount(comm, &size_), comm, "ncclCommCount");
    nccl_check(ncclCommCuDevice(comm, &device_), comm, "ncclCommCuDevice");
  }
  ~NcclCommunicator() override {
    if (owned_) ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(TensorView data, void* stream) override {
    check_tensor(data, "all_reduce_sum");
    DeviceScope scope(device_);
    nccl_check(ncclAllReduce(data.data(), data.data(), size_t(data.numel()),
                             nccl_type(data, "all_reduce_sum"), ncclSum, comm_,
                             static_cast<cudaStream_t>(stream)),
               comm_, "all_reduce_sum");
  }

  void all_gather(TensorView send, TensorView recv, void* stream) override {
    check_rows(recv, send, "all_gather");
    DeviceScope scope(device_);
    nccl_check(
        ncclAllGather(send.data(), recv.data(), size_t(send.numel()), nccl_type(send, "all_gather"),
                      comm_, static_cast<cudaStream_t>(stream)),
        comm_, "all_gather");
  }

  void reduce_scatter_sum(TensorView send, TensorView recv, void* stream) override {
    check_rows(send, recv, "reduce_scatter_sum");
    DeviceScope scope(device_);
    nccl_check(ncclReduceScatter(send.data(), recv.data(), size_t(recv.numel()),
                                 nccl_type(send, "reduce_scatter_sum"), ncclSum, comm_,
                                 static_cast<cudaStream_t>(stream)),
               comm_, "reduce_scatter_sum");
  }

  std::vector<int64_t> exchange_counts(std::span<const int64_t> counts, void* stream) override {
    check(counts.size() == size_t(size_), "NCCL exchange_counts (rank {}): {} counts for {} ranks",
          rank_, counts.size(), size_);
    DeviceScope scope(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    if (count_buffer_.bytes() < 2 * counts.size_bytes())
      count_buffer_ = DeviceBuffer(2 * counts.size_bytes());
    int64_t* send = count_buffer_.as<int64_t>();
    int64_t* recv = send + size_;
    QMOE_CUDA_CHECK(
        cudaMemcpyAsync(send, counts.data(), counts.size_bytes(), cudaMemcpyHostToDevice, s));
    nccl_check(ncclGroupStart(), comm_, "exchange_counts");
    for (int r = 0; r < size_; ++r) {
      nccl_check(ncclSend(send + r, 1, ncclInt64, r, comm_, s), comm_, "exchange_counts send");
      nccl_check(ncclRecv(recv + r, 1, ncclInt64, r, comm_, s), comm_, "exchange_counts recv");
    }
    nccl_check(ncclGroupEnd(), comm_, "exchange_counts");
    std::vector<int64_t> mine(static_cast<size_t>(size_));
    QMOE_CUDA_CHECK(
        cudaMemcpyAsync(mine.data(), recv, counts.size_bytes(), cudaMemcpyDeviceToHost, s));
    QMOE_CUDA_CHECK(cudaStreamSynchronize(s));
    return mine;
  }

  void all_to_all(TensorView send, std::span<const int64_t> send_rows, TensorView recv,
                  std::span<const int64_t> recv_rows, void* stream) override {
    check_tensor(send, "all_to_all");
    check_tensor(recv, "all_to_all");
    int64_t sent = 0, received = 0;
    for (int64_t n : send_rows) sent += n;
    for (int64_t n : recv_rows) received += n;
    check(send_rows.size() == size_t(size_) && recv_rows.size() == size_t(size_) &&
              send.rank() == 2 && recv.rank() == 2 && send.dtype() == recv.dtype() &&
              send.dim(0) == sent && recv.dim(0) == received && send.dim(1) == recv.dim(1),
          "NCCL all_to_all (rank {}): send {} must be [{}, C] and recv {} [{}, C] of one dtype, "
          "with one count per rank ({} ranks)",
          rank_, send.describe(), sent, recv.describe(), received, size_);
    const size_t row_bytes = size_t(send.dim(1)) * size_of(send.dtype());
    DeviceScope scope(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    const auto* from = static_cast<const char*>(send.data());
    auto* to = static_cast<char*>(recv.data());
    nccl_check(ncclGroupStart(), comm_, "all_to_all");
    for (int r = 0; r < size_; ++r) {
      const size_t out_bytes = size_t(send_rows[size_t(r)]) * row_bytes;
      const size_t in_bytes = size_t(recv_rows[size_t(r)]) * row_bytes;
      if (out_bytes) nccl_check(ncclSend(from, out_bytes, ncclUint8, r, comm_, s), comm_, "send");
      if (in_bytes) nccl_check(ncclRecv(to, in_bytes, ncclUint8, r, comm_, s), comm_, "recv");
      from += out_bytes;
      to += in_bytes;
    }
    nccl_check(ncclGroupEnd(), comm_, "all_to_all");
  }

 private:
  void check_tensor(const TensorView& t, const char* what) const {
    check(t.device().kind == DeviceKind::cuda && t.device().index == device_ && t.is_contiguous(),
          "NCCL {} (rank {}): {} must be contiguous memory of cuda:{}, the communicator's device",
          what, rank_, t.describe(), device_);
  }
  // `whole` holds size() times `part`, both on the device, of one dtype.
  void check_rows(const TensorView& whole, const TensorView& part, const char* what) const {
    check_tensor(whole, what);
    check_tensor(part, what);
    check(whole.dtype() == part.dtype() && whole.numel() == part.numel() * size_,
          "NCCL {} (rank {}): {} must hold {} ranks x {} ({} elements of {})", what, rank_,
          whole.describe(), size_, part.describe(), part.numel() * size_, name(part.dtype()));
  }

  ncclComm_t comm_;
  bool owned_;
  DeviceBuffer count_buffer_;  // exchange_counts' send and receive counts
  int rank_ = 0, size_ = 0, device_ = 0;
};

}  // namespace

bool nccl_built() { return true; }

std::string nccl_status() {
  int version = 0;
  ncclGetVersion(&version);
  return fmt::format("NCCL {}.{}.{} ({})", version / 10000, version / 100 % 100, version % 100,
                     QMOE_NCCL_LIBRARY);
}

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
  static_assert(sizeof(id) == sizeof(NcclUniqueId::bytes));
  NcclUniqueId out;
  std::memcpy(out.bytes.data(), &id, sizeof(id));
  return out;
}

std::unique_ptr<Communicator> nccl_communicator(const NcclUniqueId& id, int rank, int size,
                                                int device) {
  check(size >= 1 && rank >= 0 && rank < size,
        "nccl_communicator: rank {} of {} ranks (valid: 0 <= rank < size)", rank, size);
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes.data(), sizeof(nid));
  DeviceScope scope(device);
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, size, nid, rank), nullptr, "ncclCommInitRank");
  return std::make_unique<NcclCommunicator>(comm, true);
}

std::unique_ptr<Communicator> nccl_communicator(void* nccl_comm) {
  check(nccl_comm != nullptr, "nccl_communicator: the ncclComm_t is null");
  return std::make_unique<NcclCommunicator>(static_cast<ncclComm_t>(nccl_comm), false);
}

std::vector<std::unique_ptr<Communicator>> nccl_communicators(std::span<const int> devices) {
  check(!devices.empty(), "nccl_communicators: no devices given");
  std::vector<ncclComm_t> comms(devices.size());
  nccl_check(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
             nullptr, "ncclCommInitAll");
  std::vector<std::unique_ptr<Communicator>> out;
  for (ncclComm_t c : comms) out.push_back(std::make_unique<NcclCommunicator>(c, true));
  return out;
}

}  // namespace qmoe
