#include "format/gptq_zero_overflow.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/check.hpp"
#include "format/packing.hpp"

namespace qmoe::format {

namespace {

// The overflow in one word, if any. AutoGPTQ's z - 1 = -1 sets every bit from its field up, so
// the signature is: the lowest all-ones field, with all bits above it set too and at least one
// field above it (a zero point of 0 in the top field overwrites nothing).
std::optional<ZeroOverflow> overflow_in(uint32_t word, int bits) {
  const int pf = pack_factor(bits);
  const uint32_t mask = (1u << bits) - 1u;
  for (int f = 0; f < pf - 1; ++f) {
    if (((word >> (f * bits)) & mask) != mask) continue;
    const uint32_t from_here = ~0u << (f * bits);
    if ((word & from_here) != from_here) return std::nullopt;  // a masked writer's z = 0
    return ZeroOverflow{.field = f, .lost = pf - 1 - f};
  }
  return std::nullopt;
}

}  // namespace

std::vector<ZeroOverflow> find_zero_overflows(std::span<const std::byte> qzeros, int64_t G,
                                              int64_t words, int bits) {
  check(bits == 4 || bits == 8, "GPTQ zero points are 4 or 8 bits here, got {}", bits);
  check(static_cast<int64_t>(qzeros.size()) == G * words * 4,
        "qzeros has {} bytes, expected {} for [{}, {}] words", qzeros.size(), G * words * 4, G,
        words);
  std::vector<ZeroOverflow> found;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t w = 0; w < words; ++w) {
      uint32_t word;
      std::memcpy(&word, qzeros.data() + (g * words + w) * 4, 4);  // mapped: need not be aligned
      if (std::optional<ZeroOverflow> o = overflow_in(word, bits)) {
        o->group = g;
        o->word = w;
        found.push_back(*o);
      }
    }
  }
  return found;
}

void refuse_zero_overflows(std::span<const std::byte> qzeros, int64_t G, int64_t words, int bits,
                           const std::string& tensor) {
  const std::vector<ZeroOverflow> found = find_zero_overflows(qzeros, G, words, bits);
  if (found.empty()) return;
  const ZeroOverflow& o = found.front();
  const int64_t first = o.word * pack_factor(bits), zero = first + o.field;
  const int64_t last = first + pack_factor(bits) - 1;
  fail(
      "{}: group {}, output channels {}..{}: the zero point 0 of channel {} is stored the way "
      "AutoGPTQ packs it, as an unmasked z - 1 (all ones up to the top of the word), so the zero "
      "points of channels {}..{} are lost ({} such word(s) in the tensor); refused by "
      "strict_zeros (without it they read as 0)",
      tensor, o.group, first, last, zero, zero + 1, last, found.size());
}

ZeroOverflowScan::ZeroOverflowScan(const std::filesystem::path& dir) {
  quant_ = read_model_config(dir).quant;
  if (quant_.format != CheckpointFormat::gptq || quant_.gptq_version != 1) return;
  store_ = TensorStore::open(dir);
  layout_ = find_experts(*store_);
}

std::vector<GroupZeroOverflow> ZeroOverflowScan::layer(int layer) const {
  std::vector<GroupZeroOverflow> out;
  const auto experts = layout_.experts_per_layer.find(layer);
  if (!store_ || experts == layout_.experts_per_layer.end()) return out;
  for (int64_t e = 0; e < experts->second; ++e) {
    for (Role role : {Role::gate, Role::up, Role::down}) {
      const std::string module = layout_.expert_module(layer, e, role);
      const TensorInfo* qzeros = store_->find(module + ".qzeros");
      const std::optional<QuantScheme> s = quant_.scheme_for(module);
      if (!qzeros || !s || qzeros->dtype != StDType::i32 || qzeros->shape.size() != 2) continue;
      const std::string projection = module.substr(module.rfind('.') + 1);
      for (const ZeroOverflow& o :
           find_zero_overflows(qzeros->bytes, qzeros->shape[0], qzeros->shape[1], s->bits)) {
        // find_zero_overflows goes group by group: one entry per group.
        if (out.empty() || out.back().expert != e || out.back().projection != projection ||
            out.back().group != o.group) {
          out.push_back({.expert = e, .projection = projection, .group = o.group});
        }
        ++out.back().words;
        out.back().lost_channels += o.lost;
      }
    }
  }
  return out;
}

}  // namespace qmoe::format
