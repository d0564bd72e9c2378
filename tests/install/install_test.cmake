# The installed package, end to end (run by CTest as `install.own_model`, from tests/CMakeLists.txt):
#   1. cmake --install <this build> --prefix <fresh prefix>
#   2. configure examples/own_model against that prefix alone (CMAKE_PREFIX_PATH), with the build's
#      own generator and compiler, and check it found that Osprey and got -ffp-contract=off
#   3. build it and run it: it runs its model on lists, gpu/host and (EXPECT_OPENCL) gpu/opencl and
#      fails unless they agree.
# Any failing step fails the test. Inputs (-D): OSPREY_BUILD_DIR, OSPREY_SOURCE_DIR, WORK_DIR,
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, BUILD_TYPE, EXPECT_OPENCL.
cmake_minimum_required(VERSION 3.25)

foreach(var OSPREY_BUILD_DIR OSPREY_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER BUILD_TYPE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install test: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/own_model)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc}): ${ARGN}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT EXISTS ${OSPREY_BUILD_DIR}/cmake_install.cmake)
  message(FATAL_ERROR "install test: ${OSPREY_BUILD_DIR} has no cmake_install.cmake (not a configured Osprey build)")
endif()
step("installing ${OSPREY_BUILD_DIR} into ${prefix} (is libosprey built?)"
     ${CMAKE_COMMAND} --install ${OSPREY_BUILD_DIR} --prefix ${prefix})

set(configure ${CMAKE_COMMAND} -S ${OSPREY_SOURCE_DIR}/examples/own_model -B ${build} -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
if(MAKE_PROGRAM)
  list(APPEND configure -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
step("configuring examples/own_model against ${prefix}" ${configure})

# It must have found the fresh install, not some other Osprey on the machine.
file(STRINGS ${build}/CMakeCache.txt osprey_dir REGEX "^Osprey_DIR:")
if(NOT osprey_dir MATCHES "^Osprey_DIR:PATH=${prefix}/")
  message(FATAL_ERROR "install test: examples/own_model found `${osprey_dir}`, not the install in ${prefix}")
endif()
# Osprey::osprey carries the exact contract's flags into the user's translation units.
file(READ ${build}/compile_commands.json commands)
if(NOT commands MATCHES "-ffp-contract=off")
  message(FATAL_ERROR "install test: own_model.cpp was compiled without -ffp-contract=off: "
                      "Osprey::osprey must carry the exact flags")
endif()

step("building examples/own_model" ${CMAKE_COMMAND} --build ${build})
step("running own_model" ${build}/own_model)
# lists and gpu(host), and gpu(opencl) where the install has the opencl device (Osprey::opencl).
if(EXPECT_OPENCL)
  set(handlers 3)
  if(NOT step_output MATCHES "gpu\\(opencl\\) +loss")
    message(FATAL_ERROR "install test: own_model did not run on the opencl device the install has")
  endif()
else()
  set(handlers 2)
endif()
if(NOT step_output MATCHES "all ${handlers} handlers agree to the bit")
  message(FATAL_ERROR "install test: own_model did not report that the ${handlers} handlers agree")
endif()
