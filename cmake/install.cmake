# Install tree: libktune.so + headers + the ktune CLI + find_package(ktune CONFIG) + pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed binaries are stripped (debug info dropped: a RelWithDebInfo libktune is ~70 MB, ~4 MB stripped);
# the build tree keeps the debug info. `cmake --install` without --strip gets this default; configure with
# -DKTUNE_INSTALL_STRIP=OFF to install the binaries as built.
option(KTUNE_INSTALL_STRIP "strip binaries on cmake --install" ON)
install(CODE "if(NOT DEFINED CMAKE_INSTALL_DO_STRIP)
  set(CMAKE_INSTALL_DO_STRIP ${KTUNE_INSTALL_STRIP})
endif()")

install(TARGETS ktune EXPORT ktuneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ktune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET ktune_host)  # the optional LLVM host backend, found next to libktune.so at run time
  install(TARGETS ktune_host LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/ktune DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Family problem types live beside their templates and are installed under ktune/ only (a consumer's include
# path gets nothing but ktune/...): ktune/<family>/spec.hpp, which the public headers include as
# "<family>/spec.hpp" (found next to them), and the one header those include, ktune/common/dtype.h (spelled
# "../common/dtype.h" in spec.hpp, so the same text works in the source and the installed tree).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ktune
  FILES_MATCHING PATTERN "spec.hpp" REGEX "/common/dtype\\.h$")

install(EXPORT ktuneTargets NAMESPACE ktune:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ktuneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/ktuneConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ktuneConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ktuneConfig.cmake ${CMAKE_BINARY_DIR}/ktuneConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktune)
# ktune.pc locates the prefix from its own folder (${pcfiledir}), so an install under any --prefix works.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(WARNING "absolute CMAKE_INSTALL_LIBDIR or INCLUDEDIR: ktune.pc is not relocatable")
  set(KTUNE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(KTUNE_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(KTUNE_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH KTUNE_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" KTUNE_PC_UP "${KTUNE_PC_UP}")
  set(KTUNE_PC_PREFIX "\${pcfiledir}/${KTUNE_PC_UP}")
  set(KTUNE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(KTUNE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/ktune.pc.in ${CMAKE_BINARY_DIR}/ktune.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ktune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
