// The web UI page (web/index.html), embedded into the binary at build time by web/embed.cmake so
// that the server needs no files at run time.
#pragma once

#include <string>

namespace specula {

const std::string& web_ui_html();

}  // namespace specula
