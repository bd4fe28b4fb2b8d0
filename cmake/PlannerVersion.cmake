# Generates planner/core/version.hpp with the project version and the git commit at configure time.
find_package(Git QUIET)
set(PLANNER_GIT_COMMIT "unknown")
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                  OUTPUT_VARIABLE _planner_commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _planner_git_rc ERROR_QUIET)
  if(_planner_git_rc EQUAL 0 AND _planner_commit)
    set(PLANNER_GIT_COMMIT "${_planner_commit}")
  endif()
endif()
set(PLANNER_GENERATED_INCLUDE_DIR "${PROJECT_BINARY_DIR}/generated/include")
configure_file("${PROJECT_SOURCE_DIR}/cmake/version.hpp.in"
               "${PLANNER_GENERATED_INCLUDE_DIR}/planner/core/version.hpp" @ONLY)
