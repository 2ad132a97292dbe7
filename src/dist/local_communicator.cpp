// Ranks as threads of one process: each collective publishes every rank's tensor, waits until
// all ranks have, lets each rank compute its own result from all of them, and waits again before
// anyone may reuse its memory. Sums run over ranks in rank order in f32.
#include <fmt/format.h>

#include <barrier>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

float load(const TensorView& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data_as<float>()[i];
    case DType::bf16: return to_float(t.data_as<bf16_t>()[i]);
    default: return to_float(t.data_as<half_t>()[i]);
  }
}

void store(const TensorView& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::f32: t.data_as<float>()[i] = v; return;
    case DType::bf16: t.data_as<bf16_t>()[i] = to_bf16(v); return;
    default: t.data_as<half_t>()[i] = to_half(v); return;
  }
}

struct Group {
  explicit Group(int n)
      : arrived(n), sends(static_cast<size_t>(n)), problems(static_cast<size_t>(n)) {}
  std::barrier<> arrived;
  std::vector<TensorView> sends;      // each rank's tensor of the collective in progress
  std::vector<std::string> problems;  // what is wrong with a rank's own arguments, or ""
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->sends.size()); }

  void all_reduce_sum(TensorView data) override {
    publish(data, "all_reduce_sum");
    std::vector<float> sum(static_cast<size_t>(data.numel()), 0.0f);
    for (const TensorView& t : group_->sends)
      for (int64_t i = 0; i < data.numel(); ++i) sum[size_t(i)] += load(t, i);
    group_->arrived.arrive_and_wait();
    for (int64_t i = 0; i < data.numel(); ++i) store(data, i, sum[size_t(i)]);
  }

  void all_gather(TensorView send, TensorView recv) override {
    publish(send, "all_gather", rows_problem(recv, send, "all_gather"));
    const int64_t n = send.numel();
    for (int r = 0; r < size(); ++r)
      for (int64_t i = 0; i < n; ++i) store(recv, r * n + i, load(group_->sends[size_t(r)], i));
    group_->arrived.arrive_and_wait();
  }

  void reduce_scatter_sum(TensorView send, TensorView recv) override {
    publish(send, "reduce_scatter_sum", rows_problem(send, recv, "reduce_scatter_sum"));
    const int64_t n = recv.numel();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (const TensorView& t : group_->sends)
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += load(t, rank_ * n + i);
    group_->arrived.arrive_and_wait();
    for (int64_t i = 0; i < n; ++i) store(recv, i, sum[size_t(i)]);
  }

 private:
  // Every rank's tensor must be host memory of a summable dtype, contiguous, and the same size
  // and dtype as every other rank's, and no rank may have reported a problem with its own
  // arguments: each rank checks all of them after the first wait, so all ranks throw together
  // rather than some waiting forever.
  void publish(TensorView t, const char* what, std::string problem = {}) {
    group_->sends[size_t(rank_)] = t;
    group_->problems[size_t(rank_)] = std::move(problem);
    group_->arrived.arrive_and_wait();
    for (int r = 0; r < size(); ++r) {
      check(group_->problems[size_t(r)].empty(), "{} (rank {})", group_->problems[size_t(r)], r);
      const TensorView& s = group_->sends[size_t(r)];
      check(s.device().kind == DeviceKind::cpu && s.is_contiguous() &&
                (s.dtype() == DType::f32 || s.dtype() == DType::bf16 || s.dtype() == DType::f16),
            "{}: rank {} passed {}; local ranks take contiguous host f32, bf16 or f16", what, r,
            s.describe());
      check(s.numel() == t.numel() && s.dtype() == t.dtype(),
            "{}: rank {} passed {} but rank {} passed {}; every rank must pass the same size", what,
            r, s.describe(), rank_, t.describe());
    }
  }

  // "" when `whole` holds size() times the elements of `part`, of the same dtype, contiguous.
  std::string rows_problem(const TensorView& whole, const TensorView& part,
                           const char* what) const {
    if (whole.numel() == part.numel() * size() && whole.dtype() == part.dtype() &&
        whole.is_contiguous() && part.is_contiguous())
      return {};
    return fmt::format("{}: {} must be contiguous and hold {} ranks x {} ({} elements of {})", what,
                       whole.describe(), size(), part.describe(), part.numel() * size(),
                       name(part.dtype()));
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> local_communicators(int size) {
  check(size >= 1 && size <= 1024, "local_communicators: {} ranks (valid: 1 to 1024)", size);
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

}  // namespace qmoe
