# Finds the three dependencies from the system (no download at configure time: builds must work
# offline and from source). Each provides one target:
#   keywarden_dep_sodium   libsodium  (pkg-config; vcpkg's unofficial-sodium; or KEYWARDEN_SODIUM_ROOT)
#   CURL::libcurl          libcurl    (CMake's FindCURL or curl's own CURLConfig.cmake)
#   keywarden_dep_json     nlohmann/json (its CMake package; or KEYWARDEN_JSON_INCLUDE_DIR with json.hpp)

set(KEYWARDEN_SODIUM_ROOT "" CACHE PATH "libsodium prefix (include/ and lib/), used when pkg-config and vcpkg do not find it")
option(KEYWARDEN_SODIUM_STATIC "libsodium found through KEYWARDEN_SODIUM_ROOT is a static library (defines SODIUM_STATIC)" OFF)
set(KEYWARDEN_JSON_INCLUDE_DIR "" CACHE PATH "Directory containing nlohmann/json.hpp, used when no nlohmann_json CMake package is installed")

# --- libsodium -------------------------------------------------------------------------------
add_library(keywarden_dep_sodium INTERFACE)
set(_kw_sodium_found FALSE)
if(NOT KEYWARDEN_SODIUM_ROOT)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(KW_SODIUM QUIET IMPORTED_TARGET libsodium>=1.0.14)
    if(TARGET PkgConfig::KW_SODIUM)
      target_link_libraries(keywarden_dep_sodium INTERFACE PkgConfig::KW_SODIUM)
      set(_kw_sodium_found TRUE)
      message(STATUS "keywarden: libsodium ${KW_SODIUM_VERSION} (pkg-config)")
    endif()
  endif()
  if(NOT _kw_sodium_found)
    find_package(unofficial-sodium CONFIG QUIET)  # vcpkg: vcpkg install libsodium
    if(TARGET unofficial-sodium::sodium)
      target_link_libraries(keywarden_dep_sodium INTERFACE unofficial-sodium::sodium)
      set(_kw_sodium_found TRUE)
      message(STATUS "keywarden: libsodium (vcpkg unofficial-sodium)")
    endif()
  endif()
endif()
if(NOT _kw_sodium_found)
  find_path(KW_SODIUM_INCLUDE_DIR sodium.h HINTS "${KEYWARDEN_SODIUM_ROOT}" PATH_SUFFIXES include src/libsodium/include)
  find_library(KW_SODIUM_LIBRARY NAMES sodium libsodium HINTS "${KEYWARDEN_SODIUM_ROOT}"
    PATH_SUFFIXES lib lib64 bin/x64/Release/v143/static bin/x64/Release/v142/static
                  bin/x64/Release/v143/dynamic bin/x64/Release/v142/dynamic)
  if(NOT KW_SODIUM_INCLUDE_DIR OR NOT KW_SODIUM_LIBRARY)
    message(FATAL_ERROR "keywarden: libsodium not found. Install it (Debian/Ubuntu: libsodium-dev; macOS: brew install "
      "libsodium; Windows: vcpkg install libsodium) or build it from source and pass -DKEYWARDEN_SODIUM_ROOT=<prefix>. "
      "See sdk/cpp/README.md.")
  endif()
  target_include_directories(keywarden_dep_sodium INTERFACE "${KW_SODIUM_INCLUDE_DIR}")
  target_link_libraries(keywarden_dep_sodium INTERFACE "${KW_SODIUM_LIBRARY}")
  if(KEYWARDEN_SODIUM_STATIC)
    # libsodium's headers declare dllimport on Windows unless told the library is static.
    target_compile_definitions(keywarden_dep_sodium INTERFACE SODIUM_STATIC SODIUM_EXPORT=)
  endif()
  message(STATUS "keywarden: libsodium ${KW_SODIUM_LIBRARY}")
endif()

# --- libcurl ---------------------------------------------------------------------------------
if(NOT TARGET CURL::libcurl)  # a parent project may already provide it
  find_package(CURL REQUIRED)
endif()
if(NOT TARGET CURL::libcurl)
  add_library(CURL::libcurl INTERFACE IMPORTED)
  set_target_properties(CURL::libcurl PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CURL_INCLUDE_DIRS}"
                                                 INTERFACE_LINK_LIBRARIES "${CURL_LIBRARIES}")
endif()

# --- nlohmann/json ---------------------------------------------------------------------------
add_library(keywarden_dep_json INTERFACE)
if(KEYWARDEN_JSON_INCLUDE_DIR)
  if(NOT EXISTS "${KEYWARDEN_JSON_INCLUDE_DIR}/nlohmann/json.hpp")
    message(FATAL_ERROR "keywarden: ${KEYWARDEN_JSON_INCLUDE_DIR}/nlohmann/json.hpp does not exist")
  endif()
  target_include_directories(keywarden_dep_json INTERFACE "${KEYWARDEN_JSON_INCLUDE_DIR}")
  message(STATUS "keywarden: nlohmann/json from ${KEYWARDEN_JSON_INCLUDE_DIR}")
else()
  if(NOT TARGET nlohmann_json::nlohmann_json)  # a parent project may already provide it (FetchContent)
    find_package(nlohmann_json 3.2.0 CONFIG QUIET)
  endif()
  if(TARGET nlohmann_json::nlohmann_json)
    target_link_libraries(keywarden_dep_json INTERFACE nlohmann_json::nlohmann_json)
    message(STATUS "keywarden: nlohmann/json ${nlohmann_json_VERSION} (CMake package)")
  else()
    find_path(KW_JSON_INCLUDE_DIR nlohmann/json.hpp)
    if(NOT KW_JSON_INCLUDE_DIR)
      message(FATAL_ERROR "keywarden: nlohmann/json not found. Install it (Debian/Ubuntu: nlohmann-json3-dev; macOS: "
        "brew install nlohmann-json; Windows: vcpkg install nlohmann-json) or download the single header json.hpp "
        "into <dir>/nlohmann/json.hpp and pass -DKEYWARDEN_JSON_INCLUDE_DIR=<dir>. See sdk/cpp/README.md.")
    endif()
    target_include_directories(keywarden_dep_json INTERFACE "${KW_JSON_INCLUDE_DIR}")
    message(STATUS "keywarden: nlohmann/json headers in ${KW_JSON_INCLUDE_DIR}")
  endif()
endif()
