# NCCL is optional, for the NCCL communicator of sharded layers (qmoe/distributed.hpp). It comes
# with the CUDA toolkit on recent toolkits, or from the `nvidia-nccl-cu*` wheel (point NCCL_ROOT at
# its site-packages/nvidia/nccl). Without it the NCCL factories throw an Error saying why.
# Included by the build and by the installed package's qmoeConfig.cmake, which defines the same
# imported target qmoe::nccl for the static library's users.
if(NOT TARGET qmoe::nccl)
  find_path(QMOE_NCCL_INCLUDE_DIR nccl.h
            HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(QMOE_NCCL_LIBRARY NAMES nccl libnccl.so.2
               HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(QMOE_NCCL_INCLUDE_DIR AND QMOE_NCCL_LIBRARY)
    add_library(qmoe::nccl UNKNOWN IMPORTED)
    set_target_properties(qmoe::nccl PROPERTIES IMPORTED_LOCATION "${QMOE_NCCL_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${QMOE_NCCL_INCLUDE_DIR}")
  endif()
endif()
