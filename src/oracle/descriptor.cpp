#include "oracle/descriptor.hpp"

#include <algorithm>

namespace qmoe {

const BackendDescriptor* find_descriptor(std::string_view name) {
  const auto& all = all_descriptors();
  auto it = std::find_if(all.begin(), all.end(),
                         [&](const BackendDescriptor* d) { return d->name == name; });
  return it == all.end() ? nullptr : *it;
}

}  // namespace qmoe
