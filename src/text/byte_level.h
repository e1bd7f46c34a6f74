// GPT-2's byte <-> character mapping: byte-level BPE vocabularies spell every byte
// as one printable Unicode character (printable ASCII and Latin-1 as themselves,
// the other 68 bytes as U+0100 and up), so tokens are valid UTF-8 strings.
#pragma once

#include <string>
#include <string_view>

namespace zinc::text {

std::string byte_level_encode(std::string_view bytes);
// Characters outside the mapping are kept as their UTF-8 bytes.
std::string byte_level_decode(std::string_view text);

}  // namespace zinc::text
