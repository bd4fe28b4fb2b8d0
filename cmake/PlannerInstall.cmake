# Installs the libraries, headers, presets and a CMake package so another project can
#   find_package(planner) and target_link_libraries(app PRIVATE planner::sim planner::search)
include(CMakePackageConfigHelpers)

get_property(_planner_exports GLOBAL PROPERTY PLANNER_EXPORT_TARGETS)
install(TARGETS planner_warnings ${_planner_exports}
        EXPORT plannerTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET planner-gui)
  install(TARGETS planner-gui RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(_dir core core/store topologies simulator/engine simulator/search simulator/fit app kernels executor)
  if(EXISTS "${PROJECT_SOURCE_DIR}/${_dir}/include")
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_dir}/include/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()
install(FILES "${PLANNER_GENERATED_INCLUDE_DIR}/planner/core/version.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/planner/core)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/core/presets/" DESTINATION ${CMAKE_INSTALL_DATADIR}/planner/presets)
if(EXISTS "${PROJECT_SOURCE_DIR}/topologies/presets")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/topologies/presets/"
          DESTINATION ${CMAKE_INSTALL_DATADIR}/planner/presets/topologies)
endif()

install(EXPORT plannerTargets NAMESPACE planner:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/planner)
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/plannerConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/plannerConfig.cmake"
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/planner)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/plannerConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/plannerConfig.cmake" "${PROJECT_BINARY_DIR}/plannerConfigVersion.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/planner)
