#pragma once
// Tensors handed over from Python, viewed without a copy: any DLPack array (NumPy, CuPy, ...) or,
// for torch tensors, a tuple the Python side builds from the tensor's own attributes
// (python/qmoe/_tensors.py), which avoids torch's DLPack export and its stream synchronisation.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "qmoe/tensor.hpp"

namespace qmoe::python {

// An array of rank `rank` (1 to 4) from DLPack: its data, dtype, shape, strides and device, as
// they are. Read-only arrays are accepted for inputs only.
TensorView view_of(const nanobind::ndarray<>& a, const char* what, int rank = 2);
TensorView view_of(const nanobind::ndarray<nanobind::ro>& a, const char* what, int rank = 2);

// (data_ptr, dtype code (qmoe.DType), shape..., strides..., device index or -1 for the CPU),
// `rank` sizes and strides, strides in elements: (ptr, code, rows, cols, row stride, col stride,
// device) at rank 2.
TensorView view_of(const nanobind::tuple& t, const char* what, int rank = 2);

}  // namespace qmoe::python
