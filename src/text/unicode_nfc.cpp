// NFC by the book (UAX #15): decompose fully, sort combining marks by class,
// then compose each mark with the last starter unless a mark between blocks it.
// Tables come from tools/gen_unicode_nfc.py; Hangul syllables are computed.
#include "text/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace zinc::text {

namespace {

struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint16_t offset, length;
};
struct Composition {
  char32_t first, second, composite;
};

#include "text/unicode_nfc_data.inc"

constexpr char32_t kHangulBase = 0xAC00, kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr int kVowels = 21, kTrails = 28, kSyllables = 11172;
constexpr char32_t kInvalid = 0xFFFFFFFF;  // marks a byte that was not valid UTF-8

uint8_t combining_class(char32_t cp) {
  auto it = std::lower_bound(std::begin(kCombiningClass), std::end(kCombiningClass), cp,
                             [](const CombiningClass& e, char32_t c) { return e.cp < c; });
  return it != std::end(kCombiningClass) && it->cp == cp ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kHangulBase && cp < kHangulBase + kSyllables) {
    char32_t s = cp - kHangulBase;
    out.push_back(kLeadBase + s / (kVowels * kTrails));
    out.push_back(kVowelBase + (s % (kVowels * kTrails)) / kTrails);
    if (s % kTrails) out.push_back(kTrailBase + s % kTrails);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecomposition), std::end(kDecomposition), cp,
                             [](const Decomposition& e, char32_t c) { return e.cp < c; });
  if (it != std::end(kDecomposition) && it->cp == cp) {
    out.insert(out.end(), kDecompositionData + it->offset, kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kLeadBase && first < kLeadBase + 19 && second >= kVowelBase && second < kVowelBase + kVowels)
    return kHangulBase + ((first - kLeadBase) * kVowels + (second - kVowelBase)) * kTrails;
  if (first >= kHangulBase && first < kHangulBase + kSyllables && (first - kHangulBase) % kTrails == 0 &&
      second > kTrailBase && second < kTrailBase + kTrails)
    return first + (second - kTrailBase);
  auto it = std::lower_bound(std::begin(kComposition), std::end(kComposition), std::pair{first, second},
                             [](const Composition& e, std::pair<char32_t, char32_t> k) {
                               return e.first != k.first ? e.first < k.first : e.second < k.second;
                             });
  if (it != std::end(kComposition) && it->first == first && it->second == second) return it->composite;
  return 0;
}

// Decodes one UTF-8 character at text[i]; returns kInvalid (consuming one byte) if malformed.
char32_t next_code_point(std::string_view text, size_t& i) {
  auto b = static_cast<unsigned char>(text[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > text.size()) {
    ++i;
    return kInvalid;
  }
  char32_t cp = len == 1 ? b : b & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(text[i + k]);
    if ((c & 0xC0) != 0x80) {
      ++i;
      return kInvalid;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string nfc_normalize(std::string_view utf8) {
  // Nothing below U+0300 changes under NFC, and such text has no lead byte >= 0xCC.
  if (std::none_of(utf8.begin(), utf8.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; }))
    return std::string(utf8);

  std::vector<char32_t> cps;
  std::vector<unsigned char> raw_bytes;  // the invalid bytes, in order, for kInvalid entries
  cps.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) {
    size_t at = i;
    char32_t cp = next_code_point(utf8, i);
    if (cp == kInvalid) {
      raw_bytes.push_back(static_cast<unsigned char>(utf8[at]));
      cps.push_back(kInvalid);
    } else {
      decompose(cp, cps);
    }
  }
  // Canonical ordering: stable-sort every run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (cps[i] == kInvalid || combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && cps[j] != kInvalid && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Composition.
  std::vector<char32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;  // index in out of the last starter
  int last_class = -1;        // class of the last character appended after it
  for (char32_t cp : cps) {
    int cls = cp == kInvalid ? 0 : combining_class(cp);
    if (starter != SIZE_MAX && cp != kInvalid && out[starter] != kInvalid) {
      bool blocked = last_class != -1 && last_class >= cls;
      if (!blocked) {
        if (char32_t c = compose(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (cls == 0) {
      starter = out.size();
      last_class = -1;
    } else {
      last_class = cls;
    }
    out.push_back(cp);
  }
  std::string result;
  result.reserve(utf8.size());
  size_t next_raw = 0;
  for (char32_t cp : out) {
    if (cp == kInvalid) {
      result += static_cast<char>(raw_bytes[next_raw++]);
    } else {
      append_utf8(result, cp);
    }
  }
  return result;
}

}  // namespace zinc::text
