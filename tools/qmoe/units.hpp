#pragma once
// Numbers for people: sizes in B / kB / MB / GB / TB (powers of 1000) and durations in the unit
// that keeps three significant digits readable (ns, µs, ms, s); lists of layers as ranges.
#include <cstdint>
#include <string>
#include <vector>

namespace qmoe::cli {

std::string format_bytes(int64_t bytes);     // 1536 -> "1.54 kB", 999 -> "999 B"
std::string format_seconds(double seconds);  // 0.854048 -> "854 ms", 2.5e-6 -> "2.50 µs"
std::string plural(int64_t n, const char* one, const char* many);  // "1 token", "2 tokens"
std::string number_ranges(const std::vector<int>& ascending);      // {0, 1, 2, 5} -> "0-2, 5"

}  // namespace qmoe::cli
