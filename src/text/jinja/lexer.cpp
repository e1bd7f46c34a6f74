// Jinja tokenizer with jinja2's whitespace control (see lexer.h).
#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "text/jinja/value.h"

namespace zinc::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(source) {
    // jinja2 drops one trailing newline of the template (keep_trailing_newline=False).
    if (!src_.empty() && src_.back() == '\n') {
      src_.pop_back();
      if (!src_.empty() && src_.back() == '\r') src_.pop_back();
    }
  }

  std::vector<Token> run() {
    bool strip_next_text = false;  // the previous tag ended with '-'
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, (tag == std::string::npos ? src_.size() : tag) - pos_);
      if (strip_next_text) {
        text.erase(0, std::find_if(text.begin(), text.end(), [](char c) { return !is_space(c); }) - text.begin());
      }
      if (tag == std::string::npos) {
        emit_text(text);
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];
      char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && modifier != '+') {
        lstrip_block(text, tag);
      }
      emit_text(text);
      advance_to(tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0));
      if (kind == '#') {
        strip_next_text = skip_comment();
      } else {
        strip_next_text = lex_tag(kind == '{');
      }
    }
    tokens_.push_back({TokenKind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError("line " + std::to_string(line_) + ": " + what);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void advance_to(size_t p) {
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + p, '\n'));
    pos_ = p;
  }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({TokenKind::Text, text, line_});
  }

  // lstrip_blocks: drop spaces/tabs between the start of the line and the tag.
  void lstrip_block(std::string& text, size_t tag) const {
    size_t nl = text.rfind('\n');
    size_t from = nl == std::string::npos ? 0 : nl + 1;
    bool line_start = nl != std::string::npos || pos_ == 0 || src_[pos_ - 1] == '\n';
    if (!line_start) return;
    if (std::all_of(text.begin() + from, text.end(), [](char c) { return c == ' ' || c == '\t'; })) text.erase(from);
  }

  // After a tag's closing delimiter: '-' strips the next text, and trim_blocks
  // eats one newline after block and comment tags.
  bool close_tag(bool had_minus, bool had_plus, bool is_variable) {
    if (had_minus) return true;
    if (!is_variable && !had_plus && pos_ < src_.size() && src_[pos_] == '\n') advance_to(pos_ + 1);
    return false;
  }

  bool skip_comment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("unterminated comment");
    bool minus = end > pos_ && src_[end - 1] == '-';
    bool plus = end > pos_ && src_[end - 1] == '+';
    advance_to(end + 2);
    return close_tag(minus, plus, false);
  }

  bool lex_tag(bool is_variable) {
    tokens_.push_back({is_variable ? TokenKind::VarBegin : TokenKind::BlockBegin, "", line_});
    const char close = is_variable ? '}' : '%';
    int depth = 0;  // open brackets: a '}}' inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) fail(is_variable ? "unterminated '{{'" : "unterminated '{%'");
      char c = src_[pos_];
      if (depth == 0) {
        bool minus = c == '-' && src_.compare(pos_ + 1, 2, std::string(1, close) + "}") == 0;
        bool plus = c == '+' && !is_variable && src_.compare(pos_ + 1, 2, "%}") == 0;
        if (minus || plus || src_.compare(pos_, 2, std::string(1, close) + "}") == 0) {
          tokens_.push_back({is_variable ? TokenKind::VarEnd : TokenKind::BlockEnd, "", line_});
          advance_to(pos_ + 2 + (minus || plus ? 1 : 0));
          return close_tag(minus, plus, is_variable);
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos_;
        while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
        tokens_.push_back({TokenKind::Name, src_.substr(pos_, end - pos_), line_});
        advance_to(end);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(depth);
      }
    }
  }

  void lex_number() {
    auto digits_end = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
      return p;
    };
    size_t end = digits_end(pos_);
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      end = digits_end(end + 1);
      is_float = true;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        end = digits_end(p);
        is_float = true;
      }
    }
    std::string text = src_.substr(pos_, end - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, text, line_});
    advance_to(end);
  }

  // String literals follow Python's escapes (jinja2 decodes them with unicode-escape).
  void lex_string(char quote) {
    std::string out;
    int start_line = line_;
    size_t p = pos_ + 1;
    auto hex = [&](size_t at, size_t n) -> uint32_t {
      if (at + n > src_.size()) fail("bad escape in string literal");
      return static_cast<uint32_t>(std::stoul(src_.substr(at, n), nullptr, 16));
    };
    while (true) {
      if (p >= src_.size()) fail("unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      char e = p + 1 < src_.size() ? src_[p + 1] : '\0';
      p += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;  // line continuation
        case 'x': append_utf8(hex(p, 2), out); p += 2; break;
        case 'u': append_utf8(hex(p, 4), out); p += 4; break;
        case 'U': append_utf8(hex(p, 8), out); p += 8; break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i)
              v = v * 8 + (src_[p++] - '0');
            append_utf8(v, out);
          } else {  // unknown escapes stay as written
            out += '\\';
            p -= 1;
          }
      }
    }
    advance_to(p + 1);
    tokens_.push_back({TokenKind::String, out, start_line});
  }

  void lex_operator(int& depth) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenKind::Operator, op, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    char c = src_[pos_];
    if (std::string("+-/*%~<>=.,:|()[]{}").find(c) == std::string::npos) {
      fail(std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back({TokenKind::Operator, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace zinc::jinja
