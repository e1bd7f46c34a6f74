// StreamDecoder: UTF-8 reassembly across token boundaries.
#include "text/stream_decoder.h"

namespace zinc::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the character a lead byte starts, or 0 if it cannot start one.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The second byte's stricter range rules out overlong forms, surrogates and > U+10FFFF.
bool valid_second(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xE0: return second >= 0xA0 && second <= 0xBF;
    case 0xED: return second >= 0x80 && second <= 0x9F;
    case 0xF0: return second >= 0x90 && second <= 0xBF;
    case 0xF4: return second >= 0x80 && second <= 0x8F;
    default: return is_continuation(second);
  }
}

}  // namespace

std::string utf8_complete_prefix(std::string_view bytes, size_t& held_back) {
  std::string out;
  out.reserve(bytes.size());
  held_back = 0;
  for (size_t i = 0; i < bytes.size();) {
    auto lead = static_cast<unsigned char>(bytes[i]);
    size_t len = sequence_length(lead);
    if (len == 1) {
      out += bytes[i++];
      continue;
    }
    // How many of the following bytes (that exist) continue this character validly.
    size_t good = len == 0 ? 0 : 1;
    while (good > 0 && good < len && i + good < bytes.size()) {
      auto b = static_cast<unsigned char>(bytes[i + good]);
      if (good == 1 ? !valid_second(lead, b) : !is_continuation(b)) break;
      ++good;
    }
    if (len > 0 && good == len) {
      out.append(bytes.substr(i, len));
      i += len;
    } else if (len > 0 && i + good == bytes.size()) {
      held_back = good;  // a later token may complete it
      break;
    } else {
      out += kReplacement;
      i += 1;
    }
  }
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  std::string piece = tokenizer_.token_bytes(id);
  if (!seen_text_ && tokenizer_.token_type(id) != TokenType::Control) {
    seen_text_ = true;
    if (tokenizer_.add_space_prefix() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  }
  pending_ += piece;
  size_t held_back = 0;
  std::string ready = utf8_complete_prefix(pending_, held_back);
  pending_.erase(0, pending_.size() - held_back);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string out;
  for (size_t i = 0; i < pending_.size(); ++i) out += kReplacement;
  pending_.clear();
  return out;
}

}  // namespace zinc::text
