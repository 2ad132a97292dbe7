# CUDA is optional: with nvcc the CUDA backends build for sm_80 and sm_90a (real code for both,
# no PTX-only builds); without it everything else builds and tests.
set(QMOE_WITH_CUDA OFF)
if(NOT QMOE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90a-real)
    endif()
    enable_language(CUDA)
    # The forward's kernels are launched as programmatic dependents on devices of compute
    # capability 9.0+ (src/cuda/dependent_launch.cuh), which is safe only if the code running
    # there was compiled for sm_90+, where their waits exist. Embedded PTX for an older
    # architecture may be JIT-compiled on such a device without them, so a build that embeds any
    # launches every kernel plainly.
    foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(arch MATCHES "^([0-9]+)[a-z]?(-virtual)?$" AND CMAKE_MATCH_1 LESS 90)
        add_compile_definitions(QMOE_NO_DEPENDENT_LAUNCH)
        message(STATUS "qmoe: PTX for sm_${CMAKE_MATCH_1} embedded (${arch}): no dependent launch")
        break()
      endif()
    endforeach()
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      # CMake before 3.26 knows no C++20 flag for nvcc (which has one since CUDA 12).
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(QMOE_WITH_CUDA ON)
  elseif(QMOE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QMOE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "qmoe: CUDA backends ${QMOE_WITH_CUDA}")
