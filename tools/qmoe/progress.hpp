#pragma once
// A progress line on stderr ("loading 3/48 layers, 2.1 s") for work that takes longer than about a
// second, shown only when stdout is a terminal; each redraw overwrites the line, clear() removes
// it before other output.
#include <chrono>
#include <cstdint>
#include <string>

namespace qmoe::cli {

class Progress {
 public:
  Progress(std::string what, int64_t total, bool enabled);
  ~Progress();
  void step(int64_t done_now = 1);
  void clear();

 private:
  std::string what_;
  int64_t total_ = 0, done_ = 0;
  bool enabled_ = false, shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace qmoe::cli
