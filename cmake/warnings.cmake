# Target-scoped warning flags: fp4forge_set_warnings(<target>)
# -Wshadow=local is GCC's spelling; clang (make fuzz) gets its equivalent -Wshadow-uncaptured-local.
function(fp4forge_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         $<IF:$<CXX_COMPILER_ID:GNU>,-Wshadow=local,-Wshadow-uncaptured-local> -Wnon-virtual-dtor
                         -Wcast-align -Wunused -Wnull-dereference -Wimplicit-fallthrough)
  if(FP4FORGE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
