// NFC through utf8proc. utf8proc rejects a whole string that holds invalid UTF-8,
// while tokenizers must pass such bytes through, so valid runs are normalized one
// by one and the invalid bytes between them are copied as they are.
#include "text/unicode_nfc.h"

#include <cstdlib>
#include <memory>
#include <utf8proc.h>

namespace zinc::text {

namespace {

void append_nfc(std::string& out, std::string_view valid) {
  if (valid.empty()) return;
  bool ascii = true;
  for (unsigned char c : valid) ascii &= c < 0x80;
  if (ascii) {  // NFC leaves ASCII alone; skip the copy into utf8proc
    out.append(valid);
    return;
  }
  const std::string run(valid);  // utf8proc_NFC wants a NUL-terminated string
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> nfc(
      utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(run.c_str())), &std::free);
  if (nfc) out.append(reinterpret_cast<const char*>(nfc.get()));
  else out.append(valid);  // allocation failure: leave the text as it was
}

}  // namespace

std::string nfc_normalize(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  size_t run_start = 0, i = 0;
  while (i < utf8.size()) {
    utf8proc_int32_t cp;
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data() + i);
    const utf8proc_ssize_t len = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(utf8.size() - i), &cp);
    // NUL would end utf8proc's string early: treat it like an invalid byte (NFC keeps it).
    if (len > 0 && cp != 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    append_nfc(out, utf8.substr(run_start, i - run_start));
    out.push_back(utf8[i]);
    run_start = ++i;
  }
  append_nfc(out, utf8.substr(run_start));
  return out;
}

}  // namespace zinc::text
