# Target-scoped warning flags: fp4forge_set_warnings(<target>)
function(fp4forge_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
                         -Wcast-align -Wunused -Wnull-dereference -Wimplicit-fallthrough)
  if(FP4FORGE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
