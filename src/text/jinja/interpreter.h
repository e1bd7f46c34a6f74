// Renders a parsed Jinja template against a context of variables, with the
// globals transformers gives chat templates (raise_exception, strftime_now)
// and jinja2's (namespace, range, dict).
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "text/jinja/ast.h"

namespace zinc::jinja {

struct RenderOptions {
  // What strftime_now() formats; the current local time when empty.
  std::optional<std::tm> now;
};

// Throws TemplateError ("line N: ...") when rendering fails or the template
// calls raise_exception().
std::string render(const Body& program, const Dict& context, const RenderOptions& options = {});

}  // namespace zinc::jinja
