# Install tree: libktune.so + headers + the ktune CLI + find_package(ktune CONFIG) + pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ktune EXPORT ktuneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/ktune-templates)
install(TARGETS ktune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET ktune_host)  # the optional LLVM host backend, found next to libktune.so at run time
  install(TARGETS ktune_host LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/ktune DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Family problem types live beside their templates; public headers include them as "<family>/spec.hpp".
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ktune-templates
  FILES_MATCHING PATTERN "spec.hpp" PATTERN "dtype.h")

install(EXPORT ktuneTargets NAMESPACE ktune:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ktuneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/ktuneConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ktuneConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ktuneConfig.cmake ${CMAKE_BINARY_DIR}/ktuneConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ktune.pc.in ${CMAKE_BINARY_DIR}/ktune.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ktune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
