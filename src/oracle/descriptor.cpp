#include "oracle/descriptor.hpp"

#include <algorithm>

namespace qmoe {

const BackendDescriptor* find_descriptor(std::string_view name) {
  const auto& all = all_descriptors();
  auto it = std::find_if(all.begin(), all.end(),
                         [&](const BackendDescriptor* d) { return d->name == name; });
  return it == all.end() ? nullptr : *it;
}

std::vector<Activation> all_activations() {
  return {Activation::silu,
          Activation::gelu,
          Activation::gelu_tanh,
          Activation::swigluoai,
          Activation::swigluoai_uninterleave,
          Activation::silu_no_mul,
          Activation::gelu_no_mul,
          Activation::gelu_tanh_no_mul,
          Activation::relu2_no_mul};
}

}  // namespace qmoe
