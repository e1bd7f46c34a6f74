// Streaming detokenization. Tokens are bytes, not characters: one character may be
// split over several tokens (byte fallback, byte-level BPE). push() returns only
// complete, valid UTF-8 and holds back a trailing incomplete character (a lead byte
// and up to 2 of its continuation bytes) until a later token completes it. Bytes
// that no later token can turn into a character come out as U+FFFD.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace zinc::text {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text ready to print after this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is held back, as U+FFFD; the decoder is then empty.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an incomplete character
  bool seen_text_ = false;
};

// Valid UTF-8 prefix of bytes, invalid sequences replaced by U+FFFD; the length of an
// incomplete final character (0..3 bytes) is left in held_back and not emitted.
std::string utf8_complete_prefix(std::string_view bytes, size_t& held_back);

}  // namespace zinc::text
