# Runs one compile-fail case, for the host compiler (CMakeLists.txt here) and for nvcc
# (../compile_fail_cuda). Inputs:
#   COMMAND  the compiler and its flags, separated by `|`; the case file is appended
#   SOURCE   the case file; its `// EXPECT: ` line is the text the compiler must print
#   VARIANT  fail: compile as-is; it must FAIL and the diagnostics must contain the EXPECT text
#            pass: compile with -DOSPREY_POSITIVE_TWIN (the defect removed); it must succeed
#   OBJECT   optional: an object file the command writes, removed afterwards
foreach(var COMMAND SOURCE VARIANT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_case.cmake: ${var} is not set")
  endif()
endforeach()

file(STRINGS ${SOURCE} EXPECT REGEX "^// EXPECT: ")
string(REPLACE "// EXPECT: " "" EXPECT "${EXPECT}")
string(REPLACE "|" ";" command "${COMMAND}")
list(APPEND command ${SOURCE})
if(VARIANT STREQUAL "pass")
  list(APPEND command -DOSPREY_POSITIVE_TWIN)
elseif(NOT VARIANT STREQUAL "fail")
  message(FATAL_ERROR "run_case.cmake: VARIANT must be fail or pass, not `${VARIANT}`")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(diagnostics "${out}${err}")
if(DEFINED OBJECT)
  file(REMOVE ${OBJECT})
endif()

if(VARIANT STREQUAL "pass")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "positive twin of ${SOURCE} does not compile (with -DOSPREY_POSITIVE_TWIN), "
                        "so the failing variant proves nothing:\n${diagnostics}")
  endif()
  message(STATUS "positive twin compiles: ${SOURCE}")
  return()
endif()

if(EXPECT STREQUAL "")
  message(FATAL_ERROR "${SOURCE} has no `// EXPECT: ` line naming the diagnostic it must produce")
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected with a message containing `${EXPECT}`")
endif()
string(FIND "${diagnostics}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} was rejected, but the diagnostics do not contain `${EXPECT}`:\n${diagnostics}")
endif()
message(STATUS "rejected as expected (`${EXPECT}`): ${SOURCE}")
