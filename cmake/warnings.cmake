# Target-scoped warning flags: fp4forge_set_warnings(<target>)
# -Wshadow=local is GCC's spelling; clang (make fuzz) gets its equivalent -Wshadow-uncaptured-local.
function(fp4forge_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         $<IF:$<CXX_COMPILER_ID:GNU>,-Wshadow=local,-Wshadow-uncaptured-local> -Wnon-virtual-dtor
                         -Wcast-align -Wunused -Wnull-dereference -Wimplicit-fallthrough
                         # Findings are written with designated initializers that name only the fields a check
                         # sets (core/finding_sink.h); GCC 12 warns on the fields left to their defaults.
                         -Wno-missing-field-initializers)
  if(FP4FORGE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
