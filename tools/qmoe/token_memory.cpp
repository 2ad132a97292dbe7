#include "token_memory.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "command.hpp"
#include "units.hpp"

namespace qmoe::cli {

namespace {

// MemAvailable of /proc/meminfo: what can be allocated without swapping.
std::optional<int64_t> available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

void check_tokens_fit(int64_t tokens, const MoEConfig& config, DType dtype) {
  const std::optional<int64_t> available = available_bytes();
  if (!available) return;
  const int64_t H = config.hidden, k = config.top_k();
  const int64_t activations = 2 * H * static_cast<int64_t>(size_of(dtype));  // hidden and out
  const int64_t routing = config.num_experts * 4 + k * (4 + 8) + k * (4 + 4);
  const int64_t per_token = activations + routing + H * 8;
  if (tokens <= *available / per_token) return;
  // As a double: tokens * per_token may exceed 64 bits.
  const double needed = static_cast<double>(tokens) * static_cast<double>(per_token);
  usage_error(
      "--tokens {}: the tokens' buffers (hidden states, router logits, routing, output and the "
      "float64 reference) take {} ({} a token), and {} of memory is available: up to about {} "
      "tokens fit",
      tokens, format_bytes(static_cast<int64_t>(std::min(needed, 9e18))), format_bytes(per_token),
      format_bytes(*available), *available / per_token);
}

}  // namespace qmoe::cli
