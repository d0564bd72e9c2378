# osprey_check_exact_flags(<host flags> <have cuda> <cuda flags>): configuration fails when the
# flags the exact contract depends on (DESIGN.md §4, docs/EXACTNESS.md) are missing or undone.
#
#  1. The host flags must say -ffp-contract=off, and no flag a build applies to C++ (the list, the
#     directory's compile options, CMAKE_CXX_FLAGS and its per-configuration variant) may turn on
#     contraction or any of the -ffast-math family, or x87 arithmetic.
#  2. With CUDA, nvcc's flags must say -fmad=false and none may ask for fast maths.
#  3. A probe (fma_probe.cpp) compiled with those flags must not fuse a*b + c, even for an FMA
#     target: what a flag list cannot show (a compiler whose default changed, a flag spelled some
#     other way) the generated code does. Skipped when cross-compiling (nothing to run).
#
# Included by Osprey's CMakeLists.txt and by tools/differential/CMakeLists.txt.
include_guard(GLOBAL)

set(OSPREY_FORBIDDEN_CXX_FLAGS
    -ffast-math -Ofast -ffp-contract=fast -ffp-contract=on -funsafe-math-optimizations
    -fassociative-math -freciprocal-math -ffinite-math-only -fno-signed-zeros -mfpmath=387
    -fcx-limited-range)
set(OSPREY_FORBIDDEN_CUDA_FLAGS
    --use_fast_math -use_fast_math --fmad=true -fmad=true -prec-div=false --prec-div=false
    -prec-sqrt=false --prec-sqrt=false)

function(osprey_check_exact_flags host_flags have_cuda cuda_flags)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
  get_directory_property(directory_options COMPILE_OPTIONS)
  string(REPLACE " " ";" cxx_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}")
  set(applied ${host_flags} ${directory_options} ${cxx_flags})

  if(NOT "-ffp-contract=off" IN_LIST host_flags)
    message(FATAL_ERROR "osprey: the exact contract needs -ffp-contract=off in OSPREY_EXACT_FLAGS "
                        "(docs/EXACTNESS.md); the flags are: ${host_flags}")
  endif()
  foreach(flag ${applied})
    foreach(forbidden ${OSPREY_FORBIDDEN_CXX_FLAGS})
      # A flag may sit inside a generator expression: $<$<COMPILE_LANGUAGE:CXX>:-a;-b>.
      if(flag MATCHES "(^|[:,])${forbidden}>*$")
        message(FATAL_ERROR "osprey: `${forbidden}` breaks the exact contract (docs/EXACTNESS.md): "
                            "remove it from the build's flags")
      endif()
    endforeach()
  endforeach()

  if(have_cuda)
    if(NOT "-fmad=false" IN_LIST cuda_flags)
      message(FATAL_ERROR "osprey: nvcc must be given -fmad=false (docs/EXACTNESS.md); its flags are: "
                          "${cuda_flags}")
    endif()
    if(NOT cuda_flags MATCHES "-Xcompiler=[^;]*-ffp-contract=off")
      message(FATAL_ERROR "osprey: nvcc's host compiler must be given -ffp-contract=off "
                          "(-Xcompiler=-ffp-contract=off; docs/EXACTNESS.md)")
    endif()
    string(REPLACE " " ";" nvcc_flags "${CMAKE_CUDA_FLAGS} ${CMAKE_CUDA_FLAGS_${build_type}}")
    foreach(flag ${cuda_flags} ${nvcc_flags})
      if(flag IN_LIST OSPREY_FORBIDDEN_CUDA_FLAGS)
        message(FATAL_ERROR "osprey: nvcc's `${flag}` breaks the exact contract (docs/EXACTNESS.md)")
      endif()
    endforeach()
  endif()

  if(CMAKE_CROSSCOMPILING)
    return()
  endif()
  string(REPLACE ";" " " probe_flags "${host_flags}")
  try_run(probe_ran probe_compiled
          SOURCES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/fma_probe.cpp
          CMAKE_FLAGS "-DCOMPILE_DEFINITIONS=${probe_flags}"
          COMPILE_OUTPUT_VARIABLE probe_build_log
          RUN_OUTPUT_VARIABLE probe_output)
  if(NOT probe_compiled)
    message(FATAL_ERROR "osprey: the multiply-add probe did not compile:\n${probe_build_log}")
  endif()
  if(NOT probe_output MATCHES "^unfused")
    message(FATAL_ERROR "osprey: with the build's flags (${probe_flags} ${CMAKE_CXX_FLAGS}) the "
                        "compiler fuses a*b + c into one rounding (${probe_output}): the exact "
                        "contract needs -ffp-contract=off and no -ffast-math (docs/EXACTNESS.md)")
  endif()
  message(STATUS "osprey: exact-contract flags checked: ${probe_flags} (a*b + c is not fused)")
endfunction()
