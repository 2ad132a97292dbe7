# Third-party libraries, all from the system (scripts/setup.sh installs the Debian packages).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  # Debian's libcli11-dev ships the header without a CMake package on some releases.
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()

if(QMOE_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    # GPU machines carry only GoogleTest's sources.
    foreach(dir /usr/src/googletest /usr/src/gtest)
      if(EXISTS ${dir}/CMakeLists.txt AND NOT TARGET gtest)
        set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
        add_subdirectory(${dir} ${CMAKE_BINARY_DIR}/_googletest EXCLUDE_FROM_ALL)
      endif()
    endforeach()
    if(NOT TARGET gtest)
      message(FATAL_ERROR "GoogleTest not found: run scripts/setup.sh (Debian: libgtest-dev)")
    endif()
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
  include(GoogleTest)
endif()

# RE2 matches the regular expressions of untrusted quantization configs (GPTQ dynamic keys,
# compressed-tensors "re:" entries) in time linear in the module name. Optional, like CUDA: a build
# without it refuses such patterns rather than run a backtracking engine on them.
set(QMOE_RE2 "AUTO" CACHE STRING "Match config.json's module regexes with RE2: AUTO (when found), ON, OFF")
set(QMOE_WITH_RE2 OFF)
if(NOT QMOE_RE2 STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(RE2 QUIET IMPORTED_TARGET re2)
  endif()
  if(RE2_FOUND)
    set(QMOE_WITH_RE2 ON)
  elseif(QMOE_RE2 STREQUAL "ON")
    message(FATAL_ERROR "QMOE_RE2=ON but pkg-config finds no re2 (Debian: libre2-dev)")
  endif()
endif()
message(STATUS "qmoe: RE2 module patterns ${QMOE_WITH_RE2}")

find_package(benchmark QUIET)
find_package(BLAS QUIET)

# add_subdirectory() for every direct child folder of `parent` that has a CMakeLists.txt, so a new
# area (a backend, a format) is one new folder and no edit elsewhere.
function(qmoe_add_subdirectories parent)
  file(GLOB children LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${parent}/*)
  list(SORT children)
  foreach(child ${children})
    if(IS_DIRECTORY ${child} AND EXISTS ${child}/CMakeLists.txt)
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()
