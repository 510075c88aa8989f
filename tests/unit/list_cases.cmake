# list_cases.cmake - cmake -DPROGRAM=<cmocka program> -DOUT=<file> -P list_cases.cmake
# Writes the program's test cases (tests/unit/cases.c, PTC_TEST_LIST=1) to OUT, one line
# "<ctest suffix><TAB><group><TAB><case>" each. The suffix is the case's name, prefixed with its
# group's name (non-alphanumerics as _) when the case's name is in more than one group, as when
# one table runs under two group setups. Fails when the program fails or lists nothing: a
# program whose cases cannot be listed must not quietly become no tests at all.
execute_process(COMMAND ${CMAKE_COMMAND} -E env PTC_TEST_LIST=1 ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the cases of ${PROGRAM} failed (${rc}): ${err}")
endif()
string(REPLACE ";" "," out "${out}")
string(REGEX MATCHALL "ptc-case\t[^\t\n]*\t[^\t\n]*" lines "${out}")
if(NOT lines)
  message(FATAL_ERROR "${PROGRAM} listed no test case (is it a cmocka program linked with "
                      "tests/unit/cases.c?): ${out}${err}")
endif()
set(names "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^ptc-case\t[^\t]*\t" "" name "${line}")
  list(APPEND names "${name}")
endforeach()
set(text "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^ptc-case\t([^\t]*)\t.*$" "\\1" group "${line}")
  string(REGEX REPLACE "^ptc-case\t[^\t]*\t" "" name "${line}")
  set(count 0)
  foreach(other IN LISTS names)
    if(other STREQUAL name)
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  set(suffix "${name}")
  if(count GREATER 1)
    string(MAKE_C_IDENTIFIER "${group}" g)
    set(suffix "${g}.${name}")
  endif()
  string(APPEND text "${suffix}\t${group}\t${name}\n")
endforeach()
file(WRITE ${OUT} "${text}")
