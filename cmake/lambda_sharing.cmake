# osprey_check_lambda_sharing(<program>): a test, lambda_sharing.<program>, that fails when two of
# the translation units linked into the program (its own and those of every static or object
# library of the project with CUDA sources it links, directly or through another) define the same
# extended __host__ __device__ lambda's functions, which nvcc's lambda wrappers cannot survive
# (tools/build/lambda_sharing.sh says why). It reads the object files only, so it runs wherever the
# program is built, GPU or not. The libraries are read from the link graph once the whole project
# is configured, so a library linked later is checked too.
function(osprey_check_lambda_sharing program)
  # (A deferred call reads its arguments' variables when it runs: the name is written in now.)
  cmake_language(EVAL CODE
    "cmake_language(DEFER DIRECTORY [[${PROJECT_SOURCE_DIR}]] CALL osprey_add_lambda_sharing_test [[${program}]])")
endfunction()

# The project's own static and object libraries that `target` links, directly or not, into `out`.
function(osprey_linked_libraries target out)
  set(found ${${out}})
  get_target_property(direct ${target} LINK_LIBRARIES)
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  foreach(item IN LISTS direct interface)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(NOT TARGET "${item}" OR item IN_LIST found)
      continue()
    endif()
    get_target_property(imported ${item} IMPORTED)
    get_target_property(type ${item} TYPE)
    if(imported OR NOT type MATCHES "^(STATIC|OBJECT)_LIBRARY$")
      continue()
    endif()
    list(APPEND found ${item})
    osprey_linked_libraries(${item} found)
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(osprey_add_lambda_sharing_test program)
  set(libraries)
  osprey_linked_libraries(${program} libraries)
  set(objects $<TARGET_OBJECTS:${program}>)
  foreach(library IN LISTS libraries)
    get_target_property(sources ${library} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cu$")
    if(sources)  # only nvcc makes these wrappers
      list(APPEND objects $<TARGET_OBJECTS:${library}>)
    endif()
  endforeach()
  add_test(NAME lambda_sharing.${program}
           COMMAND ${PROJECT_SOURCE_DIR}/tools/build/lambda_sharing.sh ${program} ${objects}
           COMMAND_EXPAND_LISTS)
  set_tests_properties(lambda_sharing.${program} PROPERTIES LABELS build)
endfunction()
