# The release version, from git tags, computed at configure time (included after project()).
#
#   tag v1.2.3 on HEAD          FLOODGATE_VERSION 1.2.3
#   4 commits after v1.2.3      1.2.3+4.gabc1234   (SemVer build metadata; Debian sorts it after 1.2.3)
#   no tag yet                  0.1.0-dev.345+gabc1234  (PROJECT_VERSION, a pre-release of it: 345 commits)
#   no git (a source tarball)   PROJECT_VERSION, commit "unknown"
#
# -DFLOODGATE_VERSION=… -DFLOODGATE_COMMIT=… override both (a build from a tarball). Sets:
#   FLOODGATE_VERSION         the SemVer string that `floodgate --version` prints
#   FLOODGATE_VERSION_CORE    its MAJOR.MINOR.PATCH (the CMake package's version)
#   FLOODGATE_DEBIAN_VERSION  the same for dpkg: a pre-release's "-" becomes "~" (sorts before)
#   FLOODGATE_COMMIT          the short commit
#   FLOODGATE_COMMIT_DATE     the commit's date, RFC 2822 (the Debian changelog's date), and
#   FLOODGATE_COMMIT_EPOCH    in seconds (SOURCE_DATE_EPOCH of the generated files); without git,
#                             the configuration's time (or $ENV{SOURCE_DATE_EPOCH})
# A new commit or tag re-runs the configuration (CMAKE_CONFIGURE_DEPENDS on git's HEAD and refs),
# so the version never goes stale in a build directory.

string(TIMESTAMP FLOODGATE_COMMIT_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
string(TIMESTAMP FLOODGATE_COMMIT_EPOCH "%s" UTC)
find_program(FLOODGATE_GIT git)
set(_fg_git_ok FALSE)
if(FLOODGATE_GIT AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND "${FLOODGATE_GIT}" rev-parse --short=7 HEAD
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _fg_commit RESULT_VARIABLE _fg_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_fg_rc EQUAL 0)
    set(_fg_git_ok TRUE)
  endif()
endif()

if(_fg_git_ok)
  execute_process(COMMAND "${FLOODGATE_GIT}" describe --tags --match "v[0-9]*" --long --abbrev=7
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _fg_describe RESULT_VARIABLE _fg_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND "${FLOODGATE_GIT}" log -1 --format=%cD%n%ct
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _fg_date
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_fg_date MATCHES "^([^\n]+)\n([0-9]+)$")
    set(FLOODGATE_COMMIT_DATE "${CMAKE_MATCH_1}")
    set(FLOODGATE_COMMIT_EPOCH "${CMAKE_MATCH_2}")
  endif()
  # v1.2.3-4-gabc1234 (--long: also for 0 commits after the tag); a tag may carry a pre-release.
  if(_fg_rc EQUAL 0 AND _fg_describe MATCHES "^v([0-9]+\\.[0-9]+\\.[0-9]+)(-[0-9A-Za-z.-]+)?-([0-9]+)-g([0-9a-f]+)$")
    set(_fg_version "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    if(NOT CMAKE_MATCH_3 EQUAL 0)
      string(APPEND _fg_version "+${CMAKE_MATCH_3}.g${CMAKE_MATCH_4}")
    endif()
  else()
    execute_process(COMMAND "${FLOODGATE_GIT}" rev-list --count HEAD
      WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _fg_count
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    set(_fg_version "${PROJECT_VERSION}-dev.${_fg_count}+g${_fg_commit}")
  endif()
  # Re-configure when HEAD moves or a tag appears (a worktree has its own HEAD, shared refs).
  execute_process(COMMAND "${FLOODGATE_GIT}" rev-parse --absolute-git-dir --git-common-dir --symbolic-full-name HEAD
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _fg_paths
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REPLACE "\n" ";" _fg_paths "${_fg_paths}")
  list(LENGTH _fg_paths _fg_n)
  if(_fg_n GREATER_EQUAL 2)
    list(GET _fg_paths 0 _fg_gitdir)
    list(GET _fg_paths 1 _fg_common)
    if(NOT IS_ABSOLUTE "${_fg_common}")
      set(_fg_common "${PROJECT_SOURCE_DIR}/${_fg_common}")
    endif()
    set(_fg_watch "${_fg_gitdir}/HEAD")
    if(_fg_n GREATER_EQUAL 3)
      list(GET _fg_paths 2 _fg_ref)
      if(EXISTS "${_fg_common}/${_fg_ref}")
        list(APPEND _fg_watch "${_fg_common}/${_fg_ref}")
      else()  # a packed ref: its directory changes when the next commit writes it loose
        get_filename_component(_fg_ref_dir "${_fg_common}/${_fg_ref}" DIRECTORY)
        list(APPEND _fg_watch "${_fg_ref_dir}")
      endif()
    endif()
    list(APPEND _fg_watch "${_fg_common}/packed-refs" "${_fg_common}/refs/tags")
    foreach(_p ${_fg_watch})
      if(EXISTS "${_p}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_p}")
      endif()
    endforeach()
  endif()
else()
  set(_fg_version "${PROJECT_VERSION}")
  set(_fg_commit "unknown")
endif()

# -DFLOODGATE_VERSION / -DFLOODGATE_COMMIT (cache entries only when given) win; what git says is
# never cached, so that the next commit's configuration sees the next version.
foreach(_v VERSION COMMIT)
  if(DEFINED CACHE{FLOODGATE_${_v}})
    set(FLOODGATE_${_v} "$CACHE{FLOODGATE_${_v}}")
  else()
    string(TOLOWER "${_v}" _l)
    set(FLOODGATE_${_v} "${_fg_${_l}}")
  endif()
endforeach()

if(NOT FLOODGATE_VERSION MATCHES "^([0-9]+\\.[0-9]+\\.[0-9]+)([-+].*)?$")
  message(FATAL_ERROR "FLOODGATE_VERSION \"${FLOODGATE_VERSION}\" is not a semantic version (1.2.3, 1.2.3-rc.1, 1.2.3+4.gabc)")
endif()
set(FLOODGATE_VERSION_CORE "${CMAKE_MATCH_1}")
string(REGEX REPLACE "^([0-9]+\\.[0-9]+\\.[0-9]+)-" "\\1~" FLOODGATE_DEBIAN_VERSION "${FLOODGATE_VERSION}")
message(STATUS "floodgate ${FLOODGATE_VERSION} (${FLOODGATE_COMMIT})")
