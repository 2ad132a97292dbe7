#pragma once
// Checkpoint conversion on every core: for_each_index(n, f) calls f(0) .. f(n - 1) on up to
// hardware_concurrency threads. When calls throw, the exception of the lowest index is rethrown
// after all threads have stopped, so errors do not depend on scheduling.
#include <cstdint>
#include <functional>

namespace qmoe::format {

void for_each_index(int64_t n, const std::function<void(int64_t)>& f);

}  // namespace qmoe::format
