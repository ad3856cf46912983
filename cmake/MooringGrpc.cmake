# gRPC, protobuf and Abseil reach every target through one INTERFACE target, mooring_grpc.
#
# By default they are linked statically from the archives Debian's -dev packages ship
# (libgrpc++.a, libgrpc.a, libprotobuf.a, libabsl_*.a, ...). Linked
# dynamically, every process maps about 90 shared objects and the dynamic linker touches all of
# their symbol tables and relocations at start: the node agent sat at 19.7 MiB RSS idle, of which
# only 2.2 MiB was its own heap. Linked statically it keeps only the objects it calls: 12.8 MiB
# (measured with one plugin, docs/engineering-notes.md). libstdc++ and libc stay shared: they
# are in every Debian image, and ASan needs them dynamic.
#
# The control plane and node agents speak mutual TLS over TCP (shared/rpc/transport_security),
# so the secure variants are linked; OpenSSL itself stays shared (the system's libssl/libcrypto,
# the same copy shared/tls uses), never a second static copy inside gRPC.
# -DMOORING_STATIC_GRPC=OFF links the shared libraries instead.
option(MOORING_STATIC_GRPC "Link gRPC, protobuf and Abseil statically" ON)

add_library(mooring_grpc INTERFACE)
# gRPC and Abseil are threaded; compile and link everything that uses them with -pthread.
target_compile_options(mooring_grpc INTERFACE -pthread)
target_link_options(mooring_grpc INTERFACE -pthread)
if(NOT MOORING_STATIC_GRPC)
  target_link_libraries(mooring_grpc INTERFACE gRPC::grpc++ protobuf::libprotobuf)
  return()
endif()

find_package(PkgConfig REQUIRED)
execute_process(
  COMMAND ${PKG_CONFIG_EXECUTABLE} --static --libs-only-l grpc++ protobuf
  OUTPUT_VARIABLE _mooring_grpc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _mooring_grpc_rc)
if(NOT _mooring_grpc_rc EQUAL 0)
  message(FATAL_ERROR "pkg-config knows no grpc++ or protobuf; install libgrpc++-dev "
                      "and libprotobuf-dev, or configure with -DMOORING_STATIC_GRPC=OFF")
endif()
separate_arguments(_mooring_grpc_flags UNIX_COMMAND "${_mooring_grpc_flags}")
set(_mooring_grpc_names)
foreach(flag IN LISTS _mooring_grpc_flags)
  if(flag MATCHES "^-l(.+)$")
    list(APPEND _mooring_grpc_names ${CMAKE_MATCH_1})
  endif()
endforeach()
# Debian's .pc files may leave out gRPC's private dependencies; a shared link never needs them,
# a static one does.
list(APPEND _mooring_grpc_names upb re2 cares address_sorting z)
list(REMOVE_ITEM _mooring_grpc_names ssl crypto)
list(REMOVE_DUPLICATES _mooring_grpc_names)
set(_mooring_grpc_system atomic rt dl m pthread)
list(REMOVE_ITEM _mooring_grpc_names ${_mooring_grpc_system})

set(_mooring_grpc_archives)
foreach(name IN LISTS _mooring_grpc_names)
  find_library(_mooring_grpc_archive NAMES lib${name}.a NO_CACHE)
  if(NOT _mooring_grpc_archive)
    message(FATAL_ERROR "lib${name}.a not found for the static gRPC link; install its -dev "
                        "package or configure with -DMOORING_STATIC_GRPC=OFF")
  endif()
  list(APPEND _mooring_grpc_archives ${_mooring_grpc_archive})
  unset(_mooring_grpc_archive)
endforeach()

# The archives depend on each other in cycles (gpr <-> absl, grpc <-> upb), so the linker
# rescans them as one group.
string(JOIN "," _mooring_grpc_group ${_mooring_grpc_archives})
target_link_libraries(mooring_grpc INTERFACE
  "$<LINK_GROUP:RESCAN,${_mooring_grpc_group}>" OpenSSL::SSL OpenSSL::Crypto Threads::Threads ${_mooring_grpc_system})
