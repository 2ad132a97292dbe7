// Ranks as threads of one process: each collective publishes every rank's tensor, waits until
// all ranks have, lets each rank compute its own result from all of them, and waits again before
// anyone may reuse its memory. Sums run over ranks in rank order in f32. CUDA tensors are staged
// through host memory (HostStaged).
#include <fmt/format.h>

#include <barrier>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "dist/host_staging.hpp"
#include "dist/tensor_elements.hpp"
#include "qmoe/distributed.hpp"

namespace qmoe {

namespace {

struct Group {
  explicit Group(int n)
      : arrived(n),
        sends(static_cast<size_t>(n)),
        problems(static_cast<size_t>(n)),
        counts(static_cast<size_t>(n)),
        expected(static_cast<size_t>(n)) {}
  std::barrier<> arrived;
  std::vector<TensorView> sends;                 // each rank's tensor of the collective in progress
  std::vector<std::string> problems;             // what is wrong with a rank's own arguments, or ""
  std::vector<std::span<const int64_t>> counts;  // each rank's counts (exchange, all_to_all)
  std::vector<std::span<const int64_t>> expected;  // each rank's receive counts (all_to_all)
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->sends.size()); }

  void all_reduce_sum(TensorView data, void* stream) override {
    const HostStaged staged(data, stream);
    const TensorView t = staged.view();
    publish(t, "all_reduce_sum");
    std::vector<float> sum(static_cast<size_t>(t.numel()), 0.0f);
    for (const TensorView& s : group_->sends)
      for (int64_t i = 0; i < t.numel(); ++i) sum[size_t(i)] += load(s, i);
    group_->arrived.arrive_and_wait();
    for (int64_t i = 0; i < t.numel(); ++i) store(t, i, sum[size_t(i)]);
    staged.write_back();
  }

  void all_gather(TensorView send_tensor, TensorView recv_tensor, void* stream) override {
    const HostStaged staged_send(send_tensor, stream),
        staged_recv(recv_tensor, stream, HostStaged::write_only);
    const TensorView send = staged_send.view(), recv = staged_recv.view();
    publish(send, "all_gather", rows_problem(recv, send, "all_gather"));
    const int64_t n = send.numel();
    for (int r = 0; r < size(); ++r)
      for (int64_t i = 0; i < n; ++i) store(recv, r * n + i, load(group_->sends[size_t(r)], i));
    group_->arrived.arrive_and_wait();
    staged_recv.write_back();
  }

  void reduce_scatter_sum(TensorView send_tensor, TensorView recv_tensor, void* stream) override {
    const HostStaged staged_send(send_tensor, stream),
        staged_recv(recv_tensor, stream, HostStaged::write_only);
    const TensorView send = staged_send.view(), recv = staged_recv.view();
    publish(send, "reduce_scatter_sum", rows_problem(send, recv, "reduce_scatter_sum"));
    const int64_t n = recv.numel();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (const TensorView& t : group_->sends)
      for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += load(t, rank_ * n + i);
    group_->arrived.arrive_and_wait();
    for (int64_t i = 0; i < n; ++i) store(recv, i, sum[size_t(i)]);
    staged_recv.write_back();
  }

  std::vector<int64_t> exchange_counts(std::span<const int64_t> counts, void*) override {
    std::string problem;
    if (counts.size() != size_t(size()))
      problem = fmt::format("exchange_counts: {} counts for {} ranks", counts.size(), size());
    publish_counts(counts, std::move(problem));
    std::vector<int64_t> mine(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) mine[size_t(r)] = group_->counts[size_t(r)][size_t(rank_)];
    group_->arrived.arrive_and_wait();
    return mine;
  }

  void all_to_all(TensorView send_tensor, std::span<const int64_t> send_rows,
                  TensorView recv_tensor, std::span<const int64_t> recv_rows,
                  void* stream) override {
    const HostStaged staged_send(send_tensor, stream),
        staged_recv(recv_tensor, stream, HostStaged::write_only);
    const TensorView send = staged_send.view(), recv = staged_recv.view();
    std::string problem = rows_match(send, send_rows, recv, recv_rows);
    const int64_t row_bytes = send.rank() == 2 ? send.dim(1) * size_of(send.dtype()) : 0;
    group_->sends[size_t(rank_)] = send;
    group_->expected[size_t(rank_)] = recv_rows;
    publish_counts(send_rows, std::move(problem));
    // Every rank checks every pair and all wait before any throws: the counts live on the ranks'
    // stacks, which a throwing rank unwinds.
    std::string mismatch;
    for (int from = 0; from < size() && mismatch.empty(); ++from)
      for (int to = 0; to < size() && mismatch.empty(); ++to)
        if (group_->counts[size_t(from)][size_t(to)] != group_->expected[size_t(to)][size_t(from)])
          mismatch = fmt::format("all_to_all: rank {} sends {} rows to rank {}, which expects {}",
                                 from, group_->counts[size_t(from)][size_t(to)], to,
                                 group_->expected[size_t(to)][size_t(from)]);
    group_->arrived.arrive_and_wait();
    check(mismatch.empty(), "{}", mismatch);
    auto* out = static_cast<std::byte*>(recv.data());
    for (int r = 0; r < size(); ++r) {
      const std::span<const int64_t> theirs = group_->counts[size_t(r)];
      int64_t offset = 0;
      for (int d = 0; d < rank_; ++d) offset += theirs[size_t(d)];
      const auto* from = static_cast<const std::byte*>(group_->sends[size_t(r)].data());
      const int64_t bytes = theirs[size_t(rank_)] * row_bytes;
      if (bytes > 0) std::memcpy(out, from + offset * row_bytes, size_t(bytes));
      out += bytes;
    }
    group_->arrived.arrive_and_wait();
    staged_recv.write_back();
  }

 private:
  // Each rank's counts (one per rank) published for the others, checked like publish() does.
  void publish_counts(std::span<const int64_t> counts, std::string problem) {
    group_->counts[size_t(rank_)] = counts;
    group_->problems[size_t(rank_)] = std::move(problem);
    group_->arrived.arrive_and_wait();
    for (int r = 0; r < size(); ++r)
      check(group_->problems[size_t(r)].empty(), "{} (rank {})", group_->problems[size_t(r)], r);
  }

  // "" when send [sum(send_rows), C] and recv [sum(recv_rows), C] are contiguous, of one dtype,
  // with one count per rank, none negative.
  std::string rows_match(const TensorView& send, std::span<const int64_t> send_rows,
                         const TensorView& recv, std::span<const int64_t> recv_rows) const {
    int64_t sent = 0, received = 0;
    bool negative = false;
    for (int64_t n : send_rows) sent += n, negative |= n < 0;
    for (int64_t n : recv_rows) received += n, negative |= n < 0;
    if (send_rows.size() != size_t(size()) || recv_rows.size() != size_t(size()) || negative)
      return fmt::format("all_to_all: {} send and {} receive counts for {} ranks, none negative",
                         send_rows.size(), recv_rows.size(), size());
    if (send.rank() != 2 || recv.rank() != 2 || !send.is_contiguous() || !recv.is_contiguous() ||
        send.dtype() != recv.dtype() || send.dim(0) != sent || recv.dim(0) != received ||
        send.dim(1) != recv.dim(1))
      return fmt::format(
          "all_to_all: send {} must be [{}, C] and recv {} [{}, C], contiguous, of one dtype",
          send.describe(), sent, recv.describe(), received);
    return {};
  }

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
            "{}: rank {} passed {}; local ranks take contiguous f32, bf16 or f16", what, r,
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
