// Turns the token stream of a Jinja template into a syntax tree, with jinja2's
// operator precedence and the statements chat templates use (if, for, set,
// macro, call, break/continue, generation).
#pragma once

#include <string>

#include "text/jinja/ast.h"

namespace zinc::jinja {

// Throws TemplateError ("line N: ...") on a syntax error.
Body parse_template(const std::string& source);

}  // namespace zinc::jinja
