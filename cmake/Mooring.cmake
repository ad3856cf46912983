# Project-wide build policy. Every target we own calls mooring_target(); generated and
# third-party code does not, so -Werror applies to our code only.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

find_program(MOORING_CCACHE ccache)
if(MOORING_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${MOORING_CCACHE})
endif()

option(MOORING_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(MOORING_SANITIZE)
  # Applied globally so generated code and our code agree on the ASan ABI.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # Leak suppressions for every executable (shared/process/sanitizer_defaults.cpp says which, why).
  add_library(mooring_sanitizer_defaults OBJECT ${PROJECT_SOURCE_DIR}/shared/process/sanitizer_defaults.cpp)
endif()

# Relative relocations packed into DT_RELR (binutils 2.38, glibc 2.36): the node agent's 44,000
# R_X86_64_RELATIVE entries take 5 KiB instead of 700 KiB. The dynamic linker reads them all at start
# and the pages stayed resident: 0.7 MiB of an idle agent's RSS (docs/engineering-notes.md).
# The binaries stay position-independent.
include(CheckLinkerFlag)
check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" MOORING_LINKER_PACKS_RELATIVE_RELOCS)
if(MOORING_LINKER_PACKS_RELATIVE_RELOCS)
  add_link_options(-Wl,-z,pack-relative-relocs)
endif()

# Debug builds: keep line tables but not full debug info; links and ccache stay small.
set(CMAKE_CXX_FLAGS_DEBUG "-O0 -g1" CACHE STRING "" FORCE)

# mooring_target(target [NO_SANITIZER_RUNTIME]): the second for a program linked without the
# sanitizers' runtime (the task init), which gets none of their settings.
function(mooring_target target)
  cmake_parse_arguments(M "NO_SANITIZER_RUNTIME" "" "" ${ARGN})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-missing-field-initializers)
  # GCC 12's warnings drawn from its optimizer's value ranges report impossible sizes inside
  # libstdc++ at -O2/-O3 (GCC bugs 105329, 105651): `make run`'s Release build failed on a fresh
  # machine over one while the Debug build that CI runs was clean. In optimized builds they are
  # printed, not fatal; the Debug build keeps every warning an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-Wno-error=restrict -Wno-error=stringop-overflow
                                             -Wno-error=stringop-overread -Wno-error=array-bounds -Wno-error=maybe-uninitialized>)
  endif()
  target_compile_definitions(${target} PRIVATE BOOST_ASIO_NO_DEPRECATED BOOST_BEAST_USE_STD_STRING_VIEW)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  get_target_property(kind ${target} TYPE)
  if(MOORING_SANITIZE AND kind STREQUAL "EXECUTABLE" AND NOT M_NO_SANITIZER_RUNTIME)
    target_link_libraries(${target} PRIVATE mooring_sanitizer_defaults)
  endif()
endfunction()
