# `cmake --install build --prefix P` installs the public headers, libqmoe.a and the CMake package
# (P/lib/cmake/qmoe) so that other projects use it with
#   find_package(qmoe CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE qmoe::qmoe)
# The package finds the libraries qmoe links (fmt, nlohmann_json, Threads and, when built with them,
# the static CUDA runtime, NCCL and RE2) the same way this build did.
include(CMakePackageConfigHelpers)

set(QMOE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qmoe)
install(TARGETS qmoe EXPORT qmoeTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/qmoe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT qmoeTargets NAMESPACE qmoe:: DESTINATION ${QMOE_INSTALL_CMAKEDIR})
if(QMOE_WITH_NCCL)
  get_filename_component(QMOE_NCCL_ROOT_HINT "${QMOE_NCCL_INCLUDE_DIR}" DIRECTORY)
endif()
configure_package_config_file(cmake/qmoeConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/qmoeConfig.cmake
                              INSTALL_DESTINATION ${QMOE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/qmoeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/qmoeConfig.cmake
              ${PROJECT_SOURCE_DIR}/cmake/nccl.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/qmoeConfigVersion.cmake
        DESTINATION ${QMOE_INSTALL_CMAKEDIR})
