#pragma once
// Tensors handed over from Python, viewed without a copy: any DLPack array (NumPy, CuPy, ...) or,
// for torch tensors, a tuple the Python side builds from the tensor's own attributes
// (python/qmoe/_tensors.py), which avoids torch's DLPack export and its stream synchronisation.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "qmoe/tensor.hpp"

namespace qmoe::python {

// An array of rank 2 from DLPack: its data, dtype, shape, strides and device, as they are.
// Read-only arrays are accepted for inputs only.
TensorView view_of(const nanobind::ndarray<>& a, const char* what);
TensorView view_of(const nanobind::ndarray<nanobind::ro>& a, const char* what);

// (data_ptr, dtype code (qmoe.DType), rows, cols, row stride, col stride, device index or -1 for
// the CPU), strides in elements.
TensorView view_of(const nanobind::tuple& t, const char* what);

}  // namespace qmoe::python
