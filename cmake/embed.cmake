# cmake -DINPUT=file -DOUTPUT=file.c -DNAME=symbol -P embed.cmake
# Writes a C file defining `const char NAME[]` with INPUT's bytes and a NUL.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
file(WRITE "${OUTPUT}.tmp" "/* Generated from ${INPUT} by cmake/embed.cmake. */\nextern const char ${NAME}[];\nconst char ${NAME}[] = {\n${hex}0x00};\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
