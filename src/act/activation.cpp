#include "act/activation.hpp"

namespace qmoe {

template <class T>
void apply_activation(Activation a, const ActivationParams& p, const T* in, int64_t rows, int64_t I,
                      T* out) {
  const int64_t width = is_gated(a) ? 2 * I : I;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < I; ++j) out[r * I + j] = activation_at(a, p, in + r * width, I, j);
}

template void apply_activation<float>(Activation, const ActivationParams&, const float*, int64_t,
                                      int64_t, float*);
template void apply_activation<double>(Activation, const ActivationParams&, const double*, int64_t,
                                       int64_t, double*);

}  // namespace qmoe
