# Sanitizer and fuzzing builds of the whole tree (docs/reliability.md, tools/sanitize.sh).
#   -DKTUNE_SANITIZE=address,undefined   ASan + UBSan (UB is fatal: -fno-sanitize-recover)
#   -DKTUNE_SANITIZE=thread              TSan
#   -DKTUNE_FUZZ=ON                      clang only: coverage for libFuzzer (+ ASan/UBSan unless KTUNE_SANITIZE
#                                        says otherwise); build the fuzz_* targets (fuzz/CMakeLists.txt)
# Sanitizer builds of the whole tree use g++ (tools/sanitize.sh): clang links its sanitizer runtime only into
# executables, so libktune.so (--no-undefined) would not link; the clang fuzz build builds only fuzz_* targets.
# SQLite and libsodium come from Debian's uninstrumented archives; NVRTC and the driver are dlopen'ed
# binaries. Sanitizers see ktune's own code and every call into those libraries (allocations, locks).
set(KTUNE_SANITIZE "" CACHE STRING "Sanitizers for the whole build: address,undefined | thread | (empty)")
option(KTUNE_FUZZ "Build libFuzzer targets (needs clang)" OFF)

if(KTUNE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KTUNE_FUZZ needs clang's libFuzzer: configure with CC=clang CXX=clang++ "
                        "(Debian: clang and libclang-rt-dev)")
  endif()
  if(NOT KTUNE_SANITIZE)
    set(KTUNE_SANITIZE "address,undefined")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(KTUNE_SANITIZE)
  if(NOT KTUNE_SANITIZE MATCHES "^(address|undefined|address,undefined|undefined,address|thread)$")
    message(FATAL_ERROR "KTUNE_SANITIZE=${KTUNE_SANITIZE}: expected address,undefined or thread")
  endif()
  add_compile_options(-fsanitize=${KTUNE_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${KTUNE_SANITIZE})
  if(KTUNE_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
