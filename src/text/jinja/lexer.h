// Splits a Jinja template into tokens: literal text, the delimiters of {{ }} and
// {% %}, and the expression tokens inside them. Whitespace control is applied
// here, as jinja2 does it with trim_blocks=True and lstrip_blocks=True (the
// settings transformers renders chat templates with): '-' on a tag strips all
// whitespace on that side, a block or comment tag eats the newline after it, and
// spaces/tabs before a block or comment tag at the start of a line are dropped.
#pragma once

#include <string>
#include <vector>

namespace zinc::jinja {

enum class TokenKind {
  Text,        // literal template text (value)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifier or keyword (value)
  String,      // string literal, escapes already resolved (value)
  Integer,     // value holds the digits
  Float,       // value holds the literal
  Operator,    // punctuation such as '==', '(', '|' (value)
  End,         // end of template
};

struct Token {
  TokenKind kind;
  std::string value;
  int line;
};

// Throws TemplateError ("line N: ...") on an unterminated tag or string.
std::vector<Token> tokenize(const std::string& source);

}  // namespace zinc::jinja
