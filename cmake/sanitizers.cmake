# FP4FORGE_SANITIZE=address,undefined enables sanitizers for every target.
if(FP4FORGE_SANITIZE)
  add_compile_options(-fsanitize=${FP4FORGE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${FP4FORGE_SANITIZE})
endif()
