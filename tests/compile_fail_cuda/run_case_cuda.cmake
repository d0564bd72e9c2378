# Runs one device-purity case (see CMakeLists.txt here). Inputs:
#   NVCC     the CUDA compiler
#   SOURCE   the case file; its `// EXPECT: ` line is the text nvcc must print
#   VARIANT  fail: compile as-is; it must FAIL and the diagnostics must contain the EXPECT text
#            pass: compile with -DOSPREY_POSITIVE_TWIN (the defect removed); it must succeed
#   INCLUDE  the library's include directory
#   FLAGS    Osprey's CUDA flags, separated by `|`
#   OBJECT   where the object file goes
# The device pass must run (that is where a host-only call is found), so this compiles to an
# object file rather than only parsing.
foreach(var NVCC SOURCE VARIANT INCLUDE FLAGS OBJECT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_case_cuda.cmake: ${var} is not set")
  endif()
endforeach()

file(STRINGS ${SOURCE} expect REGEX "^// EXPECT: ")
string(REPLACE "// EXPECT: " "" expect "${expect}")

string(REPLACE "|" ";" flags "${FLAGS}")
set(command ${NVCC} ${flags} -I${INCLUDE} -c ${SOURCE} -o ${OBJECT})
if(VARIANT STREQUAL "pass")
  list(APPEND command -DOSPREY_POSITIVE_TWIN)
elseif(NOT VARIANT STREQUAL "fail")
  message(FATAL_ERROR "run_case_cuda.cmake: VARIANT must be fail or pass, not `${VARIANT}`")
endif()

file(REMOVE ${OBJECT})
execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(diagnostics "${out}${err}")

if(VARIANT STREQUAL "pass")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "positive twin of ${SOURCE} does not compile (with -DOSPREY_POSITIVE_TWIN), "
                        "so the failing variant proves nothing:\n${diagnostics}")
  endif()
  message(STATUS "positive twin compiles: ${SOURCE}")
  return()
endif()

if(expect STREQUAL "")
  message(FATAL_ERROR "${SOURCE} has no `// EXPECT: ` line naming the diagnostic it must produce")
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected with a message containing `${expect}`")
endif()
string(FIND "${diagnostics}" "${expect}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} was rejected, but the diagnostics do not contain `${expect}`:\n${diagnostics}")
endif()
message(STATUS "rejected as expected (`${expect}`): ${SOURCE}")
