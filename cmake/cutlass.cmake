# CUTLASS headers for the cuda-wgmma backend (sm_90a only): fetched from PyPI's nvidia-cutlass
# wheel, pinned, by scripts/fetch-cutlass.sh (run here when they are missing). Sets
# QMOE_WITH_WGMMA. QMOE_CUTLASS_DIR may point at another copy with the same layout.
set(QMOE_WITH_WGMMA OFF)
if(QMOE_WITH_CUDA AND "90a-real" IN_LIST CMAKE_CUDA_ARCHITECTURES)
  set(QMOE_CUTLASS_DIR "${PROJECT_SOURCE_DIR}/.deps/cutlass-4.2.0.0"
      CACHE PATH "CUTLASS headers: include/ and util/include/")
  if(NOT EXISTS "${QMOE_CUTLASS_DIR}/include/cutlass/cutlass.h")
    execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/fetch-cutlass.sh"
                    RESULT_VARIABLE fetch_result)
  endif()
  if(EXISTS "${QMOE_CUTLASS_DIR}/include/cutlass/cutlass.h")
    set(QMOE_WITH_WGMMA ON)
  else()
    message(WARNING "qmoe: CUTLASS headers not found in ${QMOE_CUTLASS_DIR} and "
                    "scripts/fetch-cutlass.sh failed: building without cuda-wgmma")
  endif()
endif()
message(STATUS "qmoe: cuda-wgmma backend ${QMOE_WITH_WGMMA}")
