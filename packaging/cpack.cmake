# The Debian packages, made by CPack's DEB generator from this build directory:
#   cmake --build build/release --target floodgate_cli floodgate floodgate_package_files
#   cpack --config build/release/CPackConfig.cmake -B dist      (scripts/package.sh does both)
# gives floodgate_<version>-1_<arch>.deb (the program, its manual pages and floodgate.yaml(5), the
# README and docs/ in /usr/share/doc/floodgate, /etc/floodgate/floodgate.yaml as a conffile, the
# systemd unit) and floodgate-dev_<version>-1_<arch>.deb (the static library,
# the headers, the CMake package).
#
# CPack rather than debhelper: the packages are made from the install() rules the build already
# has (one list of what goes where, the same that `cmake --install` follows), by one command in
# the release build directory, with no debian/ source package (rules, control, compat, source
# format) to keep in step with CMakeLists.txt and no dpkg-buildpackage rebuilding the project in
# a configuration of its own. dpkg-shlibdeps still writes the program's Depends
# (CPACK_DEBIAN_PACKAGE_SHLIBDEPS), as dh_shlibdeps would.
#
# The service's files below are EXCLUDE_FROM_ALL: they install with their component only (as
# CPack does), so that `cmake --install build --prefix DIR` never writes to /etc or /lib/systemd.

set(_fg_pkg ${CMAKE_CURRENT_SOURCE_DIR}/packaging)
set(_fg_gen ${CMAKE_CURRENT_BINARY_DIR}/packaging)
set(FLOODGATE_PACKAGE_MAINTAINER "floodgate maintainers <floodgate@example.org>" CACHE STRING
  "Maintainer field of the Debian packages (and their changelog)")
set(FLOODGATE_DEBIAN_REVISION 1 CACHE STRING "Debian revision of the packages")

# ---- files generated for the packages: `--target floodgate_package_files` ---------------------
# Manual pages from the program's help (help2man), gzip'd changelogs (lintian wants
# changelog.Debian.gz, and the upstream one as changelog.gz), dated by the commit.
configure_file(${_fg_pkg}/debian/changelog.in ${_fg_gen}/changelog.Debian @ONLY)
# For scripts/package.sh: the names of what it builds.
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE _fg_arch OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
file(CONFIGURE OUTPUT ${_fg_gen}/version.env CONTENT [[
FLOODGATE_VERSION='@FLOODGATE_VERSION@'
FLOODGATE_DEBIAN_VERSION='@FLOODGATE_DEBIAN_VERSION@-@FLOODGATE_DEBIAN_REVISION@'
FLOODGATE_COMMIT='@FLOODGATE_COMMIT@'
FLOODGATE_COMMIT_EPOCH='@FLOODGATE_COMMIT_EPOCH@'
FLOODGATE_DEB_ARCH='@_fg_arch@'
]] @ONLY)
set(_fg_man_pages floodgate floodgate-replay floodgate-serve floodgate-pace floodgate-simulate)
list(TRANSFORM _fg_man_pages PREPEND ${_fg_gen}/man/ OUTPUT_VARIABLE _fg_man_outputs)
list(TRANSFORM _fg_man_outputs APPEND .1.gz)
add_custom_command(OUTPUT ${_fg_man_outputs}
  COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${FLOODGATE_COMMIT_EPOCH}
          ${_fg_pkg}/man/make-man.sh $<TARGET_FILE:floodgate_cli> ${_fg_gen}/man ${FLOODGATE_VERSION}
  DEPENDS floodgate_cli ${_fg_pkg}/man/make-man.sh ${_fg_pkg}/man/floodgate-serve.h2m
  COMMENT "help2man: manual pages from floodgate's help")
add_custom_command(OUTPUT ${_fg_gen}/changelog.Debian.gz ${_fg_gen}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory gz
  COMMAND ${CMAKE_COMMAND} -E copy changelog.Debian gz/changelog.Debian
  COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/CHANGELOG.md gz/changelog
  COMMAND gzip -9nf gz/changelog.Debian gz/changelog
  COMMAND ${CMAKE_COMMAND} -E rename gz/changelog.Debian.gz changelog.Debian.gz
  COMMAND ${CMAKE_COMMAND} -E rename gz/changelog.gz changelog.gz
  DEPENDS ${_fg_gen}/changelog.Debian ${CMAKE_CURRENT_SOURCE_DIR}/CHANGELOG.md
  WORKING_DIRECTORY ${_fg_gen} VERBATIM
  COMMENT "gzip: the changelogs of the Debian packages")
# floodgate.yaml(5), the configuration file's page, from the tables of docs/configuration.md (one
# source: the page cannot drift from the reference).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_custom_command(OUTPUT ${_fg_gen}/man/floodgate.yaml.5.gz
  COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${FLOODGATE_COMMIT_EPOCH}
          ${Python3_EXECUTABLE} ${_fg_pkg}/man/make-config-man.py ${CMAKE_CURRENT_SOURCE_DIR}/docs/configuration.md
          ${_fg_gen}/man/floodgate.yaml.5.gz ${FLOODGATE_VERSION}
  DEPENDS ${_fg_pkg}/man/make-config-man.py ${CMAKE_CURRENT_SOURCE_DIR}/docs/configuration.md
  COMMENT "floodgate.yaml(5) from docs/configuration.md")
# The documentation in /usr/share/doc/floodgate: the README and docs/*.md, gzip'd as Debian
# compresses documentation (the markdown reads as text; its links name the other files).
file(GLOB _fg_doc_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)
list(PREPEND _fg_doc_sources ${CMAKE_CURRENT_SOURCE_DIR}/README.md)
set(_fg_doc_outputs)
foreach(_fg_doc ${_fg_doc_sources})
  get_filename_component(_fg_doc_name ${_fg_doc} NAME)
  add_custom_command(OUTPUT ${_fg_gen}/doc/${_fg_doc_name}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_fg_gen}/doc
    COMMAND sh -c "gzip -9n < \"$1\" > \"$2\"" sh ${_fg_doc} ${_fg_gen}/doc/${_fg_doc_name}.gz
    DEPENDS ${_fg_doc} VERBATIM)
  list(APPEND _fg_doc_outputs ${_fg_gen}/doc/${_fg_doc_name}.gz)
endforeach()
add_custom_target(floodgate_package_files
  DEPENDS ${_fg_man_outputs} ${_fg_gen}/man/floodgate.yaml.5.gz ${_fg_doc_outputs}
          ${_fg_gen}/changelog.Debian.gz ${_fg_gen}/changelog.gz)

# ---- the service's files (package floodgate, component runtime) -------------------------------
install(FILES ${_fg_pkg}/floodgate.yaml DESTINATION /etc/floodgate
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ COMPONENT runtime EXCLUDE_FROM_ALL)
# Debian 12's systemd units live in /lib/systemd/system (lintian: systemd-service-file-outside-lib).
install(FILES ${_fg_pkg}/systemd/floodgate.service DESTINATION /lib/systemd/system
  COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${_fg_man_outputs} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${_fg_gen}/man/floodgate.yaml.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5
  COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${_fg_doc_outputs} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/floodgate
  COMPONENT runtime EXCLUDE_FROM_ALL)
# The Prometheus alerting rules and the Grafana dashboard, to load or import as they are.
install(FILES ${_fg_pkg}/monitoring/alerts.yaml ${_fg_pkg}/monitoring/grafana-dashboard.json
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/floodgate/examples/monitoring
  COMPONENT runtime EXCLUDE_FROM_ALL)
set(_fg_package_components floodgate:runtime floodgate-dev:dev)
if(TARGET floodgate_python)
  list(APPEND _fg_package_components python3-floodgate:python)
endif()
foreach(_fg_package_component ${_fg_package_components})
  string(REPLACE ":" ";" _fg_pc ${_fg_package_component})
  list(GET _fg_pc 0 _fg_package)
  list(GET _fg_pc 1 _fg_component)
  install(FILES ${_fg_pkg}/debian/copyright ${_fg_gen}/changelog.Debian.gz ${_fg_gen}/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_fg_package}
    COMPONENT ${_fg_component} EXCLUDE_FROM_ALL)
  if(EXISTS ${_fg_pkg}/debian/${_fg_package}.lintian-overrides)
    install(FILES ${_fg_pkg}/debian/${_fg_package}.lintian-overrides
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${_fg_package}
      COMPONENT ${_fg_component} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# ---- CPack -------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VENDOR "The floodgate authors")
set(CPACK_PACKAGE_VERSION ${FLOODGATE_DEBIAN_VERSION})
set(CPACK_PACKAGE_CONTACT "${FLOODGATE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)  # with CPACK_SET_DESTDIR, the prefix the install rules see
set(CPACK_SET_DESTDIR ON)  # /etc/floodgate and /lib/systemd go into the package, not the host
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(TARGET floodgate_python)
  list(APPEND CPACK_COMPONENTS_ALL python)  # python3-floodgate (below)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # floodgate_<version>-<revision>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_VERSION ${FLOODGATE_DEBIAN_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${FLOODGATE_DEBIAN_REVISION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${FLOODGATE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE floodgate)  # both come from one source (one changelog)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME floodgate)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)  # Depends: the exact shared libraries it links
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "tzdata")  # and the zones of calendar limits
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${_fg_pkg}/debian/conffiles ${_fg_pkg}/debian/postinst ${_fg_pkg}/debian/prerm ${_fg_pkg}/debian/postrm)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "rate-limit service for HTTP, nginx and Envoy
floodgate serve answers rate-limit decisions over HTTP (a JSON API, an nginx
auth_request endpoint, Prometheus metrics, health checks and a dashboard)
and, with rules in envoyproxy/ratelimit's format, Envoy's RateLimitService
over gRPC. Seven exact algorithms (fixed window, moving window, sliding window
counter, token bucket, leaky bucket, GCRA, concurrency) decide on an in-memory
store, Redis, Redis Cluster or memcached.
.
This package holds the program, its manual pages (floodgate.yaml(5) for the
configuration file), its documentation, a default configuration in
/etc/floodgate and a sandboxed systemd unit, floodgate.service, that is not
enabled on install.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME floodgate-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# A static library: its users link what it links (cmake/floodgateConfig.cmake.in).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libabsl-dev, libboost-json1.81-dev, libfmt-dev, libhiredis-dev, libmemcached-dev, libssl-dev, zlib1g-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "rate-limiting library for C++ (development files)
floodgate's algorithms (fixed window, moving window, sliding window counter,
token bucket, leaky bucket, GCRA, concurrency) as exact pure functions,
applied atomically per key by an in-memory store, Redis, Redis Cluster or
memcached, with a limiter, a waiting throttle and the RateLimit headers.
.
This package holds the static library, its headers and the CMake package:
find_package(floodgate CONFIG) and target floodgate::floodgate.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-floodgate)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS ON)  # the shared libraries the extension links
set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA  # py3compile on install, py3clean on removal
  ${_fg_pkg}/debian/python3-floodgate/postinst ${_fg_pkg}/debian/python3-floodgate/prerm)
# The extension is built for one Python version (its file name says which).
math(EXPR _fg_python_next "${Python_VERSION_MINOR} + 1")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
  "python3 (>= ${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}), python3 (<< ${Python_VERSION_MAJOR}.${_fg_python_next})")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "rate-limiting library for Python (floodgate's C++ engine)
The module floodgate runs floodgate's exact algorithms (fixed window, moving
window, sliding window counter, token bucket, leaky bucket, GCRA, concurrency)
in the Python process, on an in-memory store, Redis, Redis Cluster, Sentinel or
memcached, with the GIL released around every storage call. floodgate.limits
offers the API of the limits package on that engine, and
floodgate.limits.flask a one-line switch for Flask-Limiter.")

# `cpack` first builds the "preinstall" target, which would build "all" (every test and benchmark,
# many minutes): the packages need only what scripts/package.sh builds before it.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
include(CPack)
