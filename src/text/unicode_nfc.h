// Unicode NFC normalization (canonical decomposition, reordering, composition),
// which Qwen's Hugging Face tokenizers apply before splitting text.
#pragma once

#include <string>
#include <string_view>

namespace zinc::text {

// Bytes that are not valid UTF-8 pass through unchanged.
std::string nfc_normalize(std::string_view utf8);

}  // namespace zinc::text
