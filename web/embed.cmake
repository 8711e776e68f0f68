# Turns a text file into a C++ source defining `const std::string& NAME()` in namespace specula,
# holding the file's bytes as a raw string literal (split into pieces so no compiler limit on
# literal length is hit). Usage: cmake -DIN=web/index.html -DOUT=web_ui.cpp -DNAME=web_ui_html -P
file(READ "${IN}" content)
set(delim "specula_embed")
string(FIND "${content}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}\"")
endif()
string(LENGTH "${content}" len)
set(body "")
set(pos 0)
while(pos LESS len)
  string(SUBSTRING "${content}" ${pos} 8000 piece)
  string(APPEND body "    R\"${delim}(${piece})${delim}\"\n")
  math(EXPR pos "${pos} + 8000")
endwhile()
file(WRITE "${OUT}.tmp"
"// Generated from ${IN} by web/embed.cmake. Do not edit.\n#include <string>\n\nnamespace specula {\n\nconst std::string& ${NAME}() {\n  static const std::string s =\n${body}    \"\";\n  return s;\n}\n\n}  // namespace specula\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
