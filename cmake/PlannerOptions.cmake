# Compiler warnings, sanitizers and ccache, applied through the planner_warnings interface target.
add_library(planner_warnings INTERFACE)
target_compile_options(planner_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough>
  $<$<AND:$<BOOL:${PLANNER_WERROR}>,$<COMPILE_LANGUAGE:CXX>>:-Werror>)

if(PLANNER_SANITIZE)
  string(REPLACE "," ";" _planner_sanitizers "${PLANNER_SANITIZE}")
  list(JOIN _planner_sanitizers "," _planner_sanitize_flag)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_planner_sanitize_flag}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${_planner_sanitize_flag})
endif()

find_program(PLANNER_CCACHE ccache)
if(PLANNER_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${PLANNER_CCACHE}")
endif()

# planner_add_library(NAME ALIAS SOURCES ...): a library with the project's warnings and include layout.
function(planner_add_library name alias)
  add_library(${name} ${ARGN})
  add_library(${alias} ALIAS ${name})
  target_link_libraries(${name} PRIVATE planner_warnings)
  target_compile_features(${name} PUBLIC cxx_std_20)
endfunction()

# planner_export_library(TARGET EXPORT_NAME): a library installed and exported as
# planner::EXPORT_NAME, with its headers in the folder's include/.
function(planner_export_library name export_name)
  set_target_properties(${name} PROPERTIES OUTPUT_NAME ${name} EXPORT_NAME ${export_name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_property(GLOBAL APPEND PROPERTY PLANNER_EXPORT_TARGETS ${name})
endfunction()
