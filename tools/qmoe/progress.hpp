#pragma once
// A progress line on stderr ("verifying 3/48: layer 3, cpu on cpu: preparing, 2.1 s") for work that
// takes longer than about a second, shown only when stdout and stderr are a terminal; each redraw
// overwrites the line, clear() removes it before other output. step() counts finished items;
// at() says what the current item is doing, so that one long item still shows where it is.
#include <chrono>
#include <cstdint>
#include <string>

namespace qmoe::cli {

class Progress {
 public:
  Progress(std::string what, int64_t total, bool enabled);
  ~Progress();
  void step(int64_t done_now = 1);
  void at(std::string doing);
  void clear();

 private:
  void draw();

  std::string what_, doing_;
  int64_t total_ = 0, done_ = 0;
  bool enabled_ = false, shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace qmoe::cli
