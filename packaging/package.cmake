# SPDX-License-Identifier: Apache-2.0
#
# The Debian packages (CPack DEB): `cmake --build build --target package`
# writes build/sluice_<version>_<arch>.deb (the daemon, maxctrl, modules,
# libsluice, the systemd unit, /etc/sluice.cnf, man pages) and
# build/sluice-dev_<version>_<arch>.deb (the module SDK: headers,
# sluice.pc, the libsluice.so link). Maintainer scripts, conffiles,
# copyright and changelog live beside this file. Dependencies are computed
# from the shared libraries (dpkg-shlibdeps).

set(SLUICE_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})

# /etc/sluice.cnf: a commented sample that starts as it is and listens on
# localhost only. A conffile: dpkg keeps the administrator's edits.
install(FILES ${SLUICE_PKG_DIR}/sluice.cnf
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR} COMPONENT runtime)

# Every binary package carries the copyright file and a changelog (a
# native package's: changelog.gz).
set(SLUICE_CHANGELOG ${CMAKE_BINARY_DIR}/changelog.gz)
add_custom_command(OUTPUT ${SLUICE_CHANGELOG}
  COMMAND gzip -9nc ${SLUICE_PKG_DIR}/debian/changelog > ${SLUICE_CHANGELOG}
  DEPENDS ${SLUICE_PKG_DIR}/debian/changelog)
add_custom_target(sluice_changelog ALL DEPENDS ${SLUICE_CHANGELOG})
foreach(pkg sluice sluice-dev)
  if(pkg STREQUAL "sluice")
    set(comp runtime)
  else()
    set(comp dev)
  endif()
  install(FILES ${SLUICE_PKG_DIR}/debian/copyright ${SLUICE_CHANGELOG}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg} COMPONENT ${comp})
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Who builds the package: set -DSLUICE_PACKAGE_MAINTAINER="Name <addr>".
set(SLUICE_PACKAGE_MAINTAINER "Sluice developers <sluice-devel@sluice.invalid>"
    CACHE STRING "Maintainer field of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${SLUICE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libsluice lives in Sluice's private directory (see the top CMakeLists);
# dpkg-shlibdeps runs in the staging root, so the path is relative to it.
string(REGEX REPLACE "^/" "" _sluice_prefix_rel "${CMAKE_INSTALL_PREFIX}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${_sluice_prefix_rel}/${SLUICE_PRIVATE_LIBDIR})

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME sluice)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "mariadb-client")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"pluggable database proxy for MariaDB and MySQL
Sluice sits between applications and a replicated MariaDB cluster. It
authenticates clients, routes each connection or statement to the right
server (writes to the primary, reads spread over replicas), fails over
with its MariaDB monitor, and runs filters that log, rewrite or steer
queries. It reads MaxScale-style configuration files and serves a
MaxScale-shaped REST API with the maxctrl command-line client.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    "${SLUICE_PKG_DIR}/debian/conffiles;${SLUICE_PKG_DIR}/debian/postinst;${SLUICE_PKG_DIR}/debian/postrm;${SLUICE_PKG_DIR}/debian/prerm")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME sluice-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "sluice (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEV_DESCRIPTION
"module SDK for the Sluice database proxy
Headers, pkg-config file and link library for building Sluice modules
(filters, routers, monitors) out of tree, e.g. with
pkg-config --cflags --libs sluice. See examples/filter in the sources.")

include(CPack)
