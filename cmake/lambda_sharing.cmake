# osprey_check_lambda_sharing(<program> [LIBRARIES <library>...]): a test, lambda_sharing.<program>,
# that fails when two of the program's CUDA translation units (its own and those of the listed
# static libraries) define the same extended __host__ __device__ lambda's functions, which nvcc's
# lambda wrappers cannot survive (tools/build/lambda_sharing.sh says why). It reads the object
# files only, so it runs wherever the program is built, GPU or not.
function(osprey_check_lambda_sharing program)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LIBRARIES")
  set(objects $<TARGET_OBJECTS:${program}>)
  foreach(library IN LISTS arg_LIBRARIES)
    if(TARGET ${library})
      list(APPEND objects $<TARGET_OBJECTS:${library}>)
    endif()
  endforeach()
  add_test(NAME lambda_sharing.${program}
           COMMAND ${PROJECT_SOURCE_DIR}/tools/build/lambda_sharing.sh ${program} ${objects}
           COMMAND_EXPAND_LISTS)
  set_tests_properties(lambda_sharing.${program} PROPERTIES LABELS build)
endfunction()
