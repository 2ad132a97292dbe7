#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "units.hpp"

namespace qmoe::cli {

Progress::Progress(std::string what, int64_t total, bool enabled)
    : what_(std::move(what)),
      total_(total),
      enabled_(enabled && ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { clear(); }

void Progress::step(int64_t done_now) {
  done_ += done_now;
  doing_.clear();
  draw();
}

void Progress::at(std::string doing) {
  doing_ = std::move(doing);
  draw();
}

void Progress::draw() {
  if (!enabled_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed < 1.0 || done_ >= total_) return;
  fmt::print(stderr, "\r{} {}/{}{}{}, {}\x1b[K", what_, done_, total_, doing_.empty() ? "" : ": ",
             doing_, format_seconds(elapsed));
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  fmt::print(stderr, "\r\x1b[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace qmoe::cli
