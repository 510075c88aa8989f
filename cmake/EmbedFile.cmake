# ptc_embed_file(INPUT HEADER SYMBOL): writes HEADER declaring
#   static const unsigned char SYMBOL[] = {...};   (the bytes of INPUT, then a NUL)
# so that a file kept as real source (a Python script) is compiled into a library. CMake
# re-runs when INPUT changes; the header is rewritten only when its content changes.
function(ptc_embed_file input header symbol)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${input})
  file(READ ${input} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
         bytes "${bytes}")
  get_filename_component(name ${input} NAME)
  file(WRITE ${header}.tmp "/* Generated from ${name} by ptc_embed_file (cmake/EmbedFile.cmake). */\n"
       "static const unsigned char ${symbol}[] = {\n${bytes}0x00\n};\n")
  configure_file(${header}.tmp ${header} COPYONLY)
endfunction()
