# planner_embed_files(OUTPUT <cpp> NAMESPACE <ns> FUNCTION <fn> BASE <dir> FILES <f>...)
#
# Generates a C++ source defining `std::span<const planner::EmbeddedFile> <ns>::<fn>()` that holds the
# contents of FILES (paths relative to BASE) as string literals, so presets ship inside the binary.
# The generated file is rebuilt whenever one of the inputs changes.
function(planner_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;NAMESPACE;FUNCTION;BASE" "FILES" ${ARGN})
  set(_inputs "")
  foreach(_f IN LISTS ARG_FILES)
    list(APPEND _inputs "${ARG_BASE}/${_f}")
  endforeach()
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND "${CMAKE_COMMAND}" -DOUTPUT=${ARG_OUTPUT} -DNAMESPACE=${ARG_NAMESPACE}
            -DFUNCTION=${ARG_FUNCTION} -DBASE=${ARG_BASE} "-DFILES=${ARG_FILES}"
            -P "${PROJECT_SOURCE_DIR}/cmake/PlannerEmbedScript.cmake"
    DEPENDS ${_inputs} "${PROJECT_SOURCE_DIR}/cmake/PlannerEmbedScript.cmake"
    COMMENT "Embedding ${ARG_NAMESPACE}::${ARG_FUNCTION}"
    VERBATIM)
endfunction()
