//===- JsonText.h - Writing JSON by hand ------------------------*- C++ -*-===//
//
// Private to the driver: the checkpoint index, strata-inspect's summary and
// traces write their JSON by hand; a string goes through here.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_DRIVER_JSONTEXT_H
#define STRATA_RUNTIME_DRIVER_JSONTEXT_H

#include <cstdio>
#include <string>

namespace strata::runtime {

/// `s` as a JSON string literal, quotes included.
inline std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_DRIVER_JSONTEXT_H
