// The GPT-2 byte <-> character tables, built once.
#include "text/byte_level.h"

#include <array>
#include <cstdint>

namespace zinc::text {

namespace {

struct Tables {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 512> byte_of_char{};  // every mapped character is below U+0200

  Tables() {
    byte_of_char.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of_byte[b] = printable ? static_cast<char32_t>(b) : next_extra++;
      byte_of_char[char_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    char32_t c = t.char_of_byte[b];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {  // all mapped characters are below U+0800: two UTF-8 bytes
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::string byte_level_decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80 && t.byte_of_char[b0] >= 0) {
      out += static_cast<char>(t.byte_of_char[b0]);
      ++i;
      continue;
    }
    if ((b0 >> 5) == 6 && i + 1 < text.size()) {
      char32_t c = (b0 & 0x1F) << 6 | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      if (c < t.byte_of_char.size() && t.byte_of_char[c] >= 0) {
        out += static_cast<char>(t.byte_of_char[c]);
        i += 2;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

}  // namespace zinc::text
