# cmake -DREADME=README.md -DOUT=readme_example.c -P readme_extract.cmake
# Writes the first ```c block of the README to OUT, with a #line directive so
# that compiler messages point into the README itself.
file(READ "${README}" text)
string(FIND "${text}" "\n```c\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${README}: no ```c block")
endif()
math(EXPR first "${open} + 6")
string(SUBSTRING "${text}" ${first} -1 rest)
string(FIND "${rest}" "\n```" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${README}: the first ```c block is not closed")
endif()
math(EXPR close "${close} + 1")
string(SUBSTRING "${rest}" 0 ${close} code)
# The line number of the block's first line: one more than the newlines before it.
string(SUBSTRING "${text}" 0 ${first} before)
string(REGEX MATCHALL "\n" newlines "${before}")
list(LENGTH newlines line)
math(EXPR line "${line} + 1")
file(WRITE "${OUT}" "#line ${line} \"${README}\"\n${code}")
