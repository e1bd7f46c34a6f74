// jinja2's built-in behaviour over values: attribute and item lookup (including
// the Python str / dict methods templates call), filters and tests. Errors are
// thrown as TemplateError without a line; the interpreter adds it.
#pragma once

#include <string>

#include "text/jinja/value.h"

namespace zinc::jinja {

// obj.name: dict methods and keys, namespace attributes, str methods (bound).
// Missing attributes give an Undefined; an Undefined obj throws its hint.
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: dict keys, list / str indices (negative from the end).
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's slice rules; null Values mean "omitted".
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// value | name(args)
Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
// value is name(args)
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);
// x in container
bool contains(const Value& container, const Value& item);

}  // namespace zinc::jinja
