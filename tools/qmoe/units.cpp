#include "units.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace qmoe::cli {

namespace {

// Three significant digits: 1.23, 12.3, 123.
std::string three_digits(double v, const char* unit) {
  const int decimals = v < 10 ? 2 : v < 100 ? 1 : 0;
  return fmt::format("{:.{}f} {}", v, decimals, unit);
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  constexpr std::array<const char*, 5> kUnits{"kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes) / 1000;
  size_t unit = 0;
  while (v >= 999.5 && unit + 1 < kUnits.size()) {
    v /= 1000;
    ++unit;
  }
  return three_digits(v, kUnits[unit]);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return fmt::format("{} s", seconds);
  if (seconds >= 0.9995) return three_digits(seconds, "s");
  if (seconds >= 0.9995e-3) return three_digits(seconds * 1e3, "ms");
  if (seconds >= 0.9995e-6) return three_digits(seconds * 1e6, "µs");
  return three_digits(seconds * 1e9, "ns");
}

std::string plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string number_ranges(const std::vector<int>& ascending) {
  std::string text;
  for (size_t i = 0; i < ascending.size();) {
    size_t j = i;
    while (j + 1 < ascending.size() && ascending[j + 1] == ascending[j] + 1) ++j;
    text += fmt::format("{}{}", text.empty() ? "" : ", ",
                        i == j ? fmt::format("{}", ascending[i])
                               : fmt::format("{}-{}", ascending[i], ascending[j]));
    i = j + 1;
  }
  return text;
}

}  // namespace qmoe::cli
