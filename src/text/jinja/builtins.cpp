// jinja2's built-in filters and tests, item / attribute lookup and the Python
// str and dict methods chat templates call (see builtins.h).
#include "text/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace zinc::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw TemplateError(what); }

const Value* arg(const CallArgs& a, size_t i, const std::string& name) { return a.get(i, name); }

std::string string_arg(const CallArgs& a, size_t i, const std::string& name, const std::string& fallback) {
  const Value* v = arg(a, i, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_string()) type_error("argument '" + name + "' must be a string, not " + v->type_name());
  return v->as_string();
}

int64_t int_arg(const CallArgs& a, size_t i, const std::string& name, int64_t fallback) {
  const Value* v = arg(a, i, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) type_error("argument '" + name + "' must be an integer, not " + v->type_name());
  return v->as_int();
}

bool is_py_space(const std::string& cp) {
  return cp.size() == 1 && (cp[0] == ' ' || (cp[0] >= '\t' && cp[0] <= '\r') || (cp[0] >= '\x1c' && cp[0] <= '\x1f'));
}

// str.strip / lstrip / rstrip: chars empty-optional means whitespace.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = utf8_code_points(s);
  std::vector<std::string> set;
  bool whitespace = !chars || chars->is_none();
  if (!whitespace) {
    if (!chars->is_string()) type_error("strip arg must be None or str");
    set = utf8_code_points(chars->as_string());
  }
  auto strip_it = [&](const std::string& cp) {
    return whitespace ? is_py_space(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

List py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty pieces
    auto cps = utf8_code_points(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      std::string piece;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        for (; i < cps.size(); ++i) piece += cps[i];
        while (!piece.empty() && is_py_space(std::string(1, piece.back()))) piece.pop_back();
        out.emplace_back(piece);
        break;
      }
      while (i < cps.size() && !is_py_space(cps[i])) piece += cps[i++];
      out.emplace_back(piece);
    }
    return out;
  }
  if (!sep->is_string()) type_error("must be str or None, not " + sep->type_name());
  const std::string& d = sep->as_string();
  if (d.empty()) type_error("empty separator");
  size_t start = 0;
  while (true) {
    size_t at = s.find(d, start);
    if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = utf8_code_points(s);
    int64_t n = 0;
    for (const auto& cp : cps) {
      if (count < 0 || n < count) out += repl, ++n;
      out += cp;
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + repl;
    start = at + old.size();
    ++n;
  }
  return out + s.substr(start);
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool word_start = true;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(word_start ? std::toupper(u) : std::tolower(u));
      word_start = false;
    } else {
      word_start = !std::isdigit(u) && u < 0x80;
    }
  }
  return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) type_error("startswith/endswith arg must be str or a tuple of str");
    const std::string& p = a.as_string();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

Value string_method(const std::string& s, const std::string& name) {
  auto bind = [&](auto fn) { return Value::function("str." + name, [s, fn](const CallArgs& a) { return fn(s, a); }); };
  if (name == "strip")
    return bind([](const std::string& s, const CallArgs& a) {
      return Value(py_strip(s, arg(a, 0, "chars"), true, true));
    });
  if (name == "lstrip")
    return bind([](const std::string& s, const CallArgs& a) {
      return Value(py_strip(s, arg(a, 0, "chars"), true, false));
    });
  if (name == "rstrip")
    return bind([](const std::string& s, const CallArgs& a) {
      return Value(py_strip(s, arg(a, 0, "chars"), false, true));
    });
  if (name == "split") {
    return bind([](const std::string& s, const CallArgs& a) {
      return Value(py_split(s, arg(a, 0, "sep"), int_arg(a, 1, "maxsplit", -1)));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bind([prefix](const std::string& s, const CallArgs& a) {
      const Value* affix = arg(a, 0, "prefix");
      if (!affix) type_error("startswith/endswith takes one argument");
      return Value(affix_match(s, *affix, prefix));
    });
  }
  if (name == "replace") {
    return bind([](const std::string& s, const CallArgs& a) {
      return Value(py_replace(s, string_arg(a, 0, "old", ""), string_arg(a, 1, "new", ""), int_arg(a, 2, "count", -1)));
    });
  }
  if (name == "upper")
    return bind([](const std::string& s, const CallArgs&) {
      return Value(ascii_map(s, [](int c) { return std::toupper(c); }));
    });
  if (name == "lower")
    return bind([](const std::string& s, const CallArgs&) {
      return Value(ascii_map(s, [](int c) { return std::tolower(c); }));
    });
  if (name == "capitalize") return bind([](const std::string& s, const CallArgs&) { return Value(capitalize(s)); });
  if (name == "title") return bind([](const std::string& s, const CallArgs&) { return Value(title(s)); });
  if (name == "splitlines") {
    return bind([](const std::string& s, const CallArgs&) {
      List lines;
      size_t start = 0;
      while (start < s.size()) {
        size_t end = s.find_first_of("\r\n", start);
        if (end == std::string::npos) end = s.size();
        lines.emplace_back(s.substr(start, end - start));
        start = end + (s.compare(end, 2, "\r\n") == 0 ? 2 : 1);
      }
      return Value(std::move(lines));
    });
  }
  if (name == "count") {
    return bind([](const std::string& s, const CallArgs& a) {
      std::string sub = string_arg(a, 0, "sub", "");
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_code_points(s).size() + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    int (*cls)(int) = name == "isdigit" ? [](int c) { return std::isdigit(c); }
                      : name == "isalpha" ? [](int c) { return std::isalpha(c); }
                                          : [](int c) { return std::isspace(c); };
    return bind([cls](const std::string& s, const CallArgs&) {
      return Value(!s.empty() &&
                   std::all_of(s.begin(), s.end(), [cls](char c) { return cls(static_cast<unsigned char>(c)) != 0; }));
    });
  }
  if (name == "find") {
    return bind([](const std::string& s, const CallArgs& a) {
      size_t at = s.find(string_arg(a, 0, "sub", ""));
      if (at == std::string::npos) return Value(int64_t{-1});
      return Value(static_cast<int64_t>(utf8_code_points(s.substr(0, at)).size()));
    });
  }
  if (name == "join") {
    return bind([](const std::string& s, const CallArgs& a) {
      const Value* items = arg(a, 0, "iterable");
      if (!items) type_error("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : items->iterate()) {
        if (!v.is_string()) type_error("sequence item: expected str instance, " + v.type_name() + " found");
        out += (first ? "" : s) + v.as_string();
        first = false;
      }
      return Value(out);
    });
  }
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& d, const std::string& name) {
  auto bind = [&](auto fn) {
    return Value::function("dict." + name, [d, fn](const CallArgs& a) { return fn(d.as_dict(), a); });
  };
  if (name == "get") {
    return bind([](const Dict& dict, const CallArgs& a) {
      const Value* key = arg(a, 0, "key");
      if (!key) type_error("get expected at least 1 argument");
      const Value* found = key->is_string() ? dict.find(key->as_string()) : nullptr;
      if (found) return *found;
      const Value* fallback = arg(a, 1, "default");
      return fallback ? *fallback : Value(nullptr);
    });
  }
  if (name == "items") {
    return bind([](const Dict& dict, const CallArgs&) {
      List pairs;
      for (const auto& [k, v] : dict.entries) pairs.push_back(Value::tuple(List{Value(k), v}));
      return Value(std::move(pairs));
    });
  }
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return bind([keys](const Dict& dict, const CallArgs&) {
      List out;
      for (const auto& [k, v] : dict.entries) out.push_back(keys ? Value(k) : v);
      return Value(std::move(out));
    });
  }
  return Value();
}

int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

// The attribute or item `name` of an item, as selectattr / map / join look it up.
Value item_attribute(const Value& item, const std::string& name) {
  Value v = item;
  size_t start = 0;
  while (true) {  // dotted paths such as "function.name"
    size_t dot = name.find('.', start);
    std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    v = get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  type_error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

CallArgs shift_args(const CallArgs& a, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < a.positional.size(); ++i) rest.positional.push_back(a.positional[i]);
  rest.keyword = a.keyword;
  return rest;
}

Value select_items(const Value& seq, const CallArgs& a, bool by_attribute, bool keep_matching) {
  List out;
  size_t test_at = by_attribute ? 1 : 0;
  std::string attribute = by_attribute ? string_arg(a, 0, "attribute", "") : "";
  const Value* test = arg(a, test_at, "test");
  CallArgs test_args = shift_args(a, test_at + 1);
  for (const Value& item : seq.iterate()) {
    Value subject = by_attribute ? item_attribute(item, attribute) : item;
    bool ok = test ? apply_test(test->str(), subject, test_args) : subject.truthy();
    if (ok == keep_matching) out.push_back(item);
  }
  return Value(std::move(out));
}

Value to_int(const Value& v, const CallArgs& a) {
  Value fallback = arg(a, 0, "default") ? *arg(a, 0, "default") : Value(int64_t{0});
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return Value(static_cast<int64_t>(std::trunc(v.as_float())));
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), nullptr, true, true);
    try {
      size_t used = 0;
      int64_t i = std::stoll(s, &used, static_cast<int>(int_arg(a, 1, "base", 10)));
      if (used == s.size()) return Value(i);
      double d = std::stod(s, &used);
      if (used == s.size()) return Value(static_cast<int64_t>(std::trunc(d)));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

JsonDumpOptions tojson_options(const CallArgs& a) {
  JsonDumpOptions o;
  if (const Value* v = arg(a, 1, "ensure_ascii")) o.ensure_ascii = v->truthy();
  if (const Value* v = arg(a, 0, "indent"); v && !v->is_none()) {
    o.has_indent = true;
    o.indent = v->is_string() ? v->as_string()
                              : std::string(static_cast<size_t>(std::max<int64_t>(0, v->as_int())), ' ');
    o.item_separator = ",";
  }
  if (const Value* v = arg(a, 2, "separators"); v && !v->is_none()) {
    if (!v->is_list() || v->as_list().size() != 2) type_error("separators must be a pair of strings");
    o.item_separator = v->as_list()[0].str();
    o.key_separator = v->as_list()[1].str();
  }
  if (const Value* v = arg(a, 3, "sort_keys")) o.sort_keys = v->truthy();
  return o;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) type_error(obj.undefined_hint().empty() ? "value is undefined" : obj.undefined_hint());
  if (obj.is_dict()) {
    // Python looks up attributes before keys, so dict methods shadow keys.
    Value method = dict_method(obj, name);
    if (!method.is_undefined()) return method;
    if (const Value* v = obj.as_dict().find(name)) return *v;
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  if (obj.is_namespace()) {
    if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
    return Value::undefined("'Namespace' object has no attribute '" + name + "'");
  }
  if (obj.is_string()) return string_method(obj.as_string(), name);
  std::string type = obj.is_none() ? "None" : "'" + obj.type_name() + " object'";
  return Value::undefined(type + " has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) type_error(obj.undefined_hint().empty() ? "value is undefined" : obj.undefined_hint());
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const List& l = obj.as_list();
      int64_t i = normalize_index(key.as_int(), static_cast<int64_t>(l.size()));
      if (i >= 0 && i < static_cast<int64_t>(l.size())) return l[i];
      return Value::undefined("list object has no element " + key.repr());
    }
    auto cps = utf8_code_points(obj.as_string());
    int64_t i = normalize_index(key.as_int(), static_cast<int64_t>(cps.size()));
    if (i >= 0 && i < static_cast<int64_t>(cps.size())) return Value(cps[i]);
    return Value::undefined("str object has no element " + key.repr());
  }
  if (key.is_string()) {  // jinja2 falls back to the attribute
    Value v = get_attribute(obj, key.as_string());
    if (!v.is_undefined()) return v;
  }
  std::string type = obj.is_none() ? "None" : "'" + obj.type_name() + " object'";
  return Value::undefined(type + " has no attribute " + key.repr());
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) type_error(obj.undefined_hint().empty() ? "value is undefined" : obj.undefined_hint());
  List items;
  if (obj.is_list()) items = obj.as_list();
  else if (obj.is_string()) items = obj.iterate();
  else type_error("'" + obj.type_name() + "' object is not subscriptable");
  auto bound = [](const Value& v) -> const Value* { return v.is_none() || v.is_undefined() ? nullptr : &v; };
  int64_t n = static_cast<int64_t>(items.size());
  int64_t step = bound(step_v) ? step_v.as_int() : 1;
  if (step == 0) type_error("slice step cannot be zero");
  auto clamp = [&](const Value* v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = v->as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = clamp(bound(start_v), step > 0 ? 0 : n - 1);
  int64_t stop = clamp(bound(stop_v), step > 0 ? n : -1);
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(items[i]);
  if (obj.is_list()) return Value(std::move(out));
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return Value(s);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  if (!container.is_list() && !container.is_undefined()) {
    type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
  for (const Value& v : container.iterate()) {
    if (v.equals(item)) return true;
  }
  return false;
}

Value apply_filter(const std::string& name, const Value& value, const CallArgs& a) {
  if (name == "default" || name == "d") {
    bool boolean = arg(a, 1, "boolean") && arg(a, 1, "boolean")->truthy();
    if (value.is_undefined() || (boolean && !value.truthy())) {
      const Value* fallback = arg(a, 0, "default_value");
      return fallback ? *fallback : Value("");
    }
    return value;
  }
  if (name == "trim") return Value(py_strip(value.str(), arg(a, 0, "chars"), true, true));
  if (name == "length" || name == "count") {
    if (value.is_string()) return Value(static_cast<int64_t>(utf8_code_points(value.as_string()).size()));
    if (value.is_list()) return Value(static_cast<int64_t>(value.as_list().size()));
    if (value.is_dict()) return Value(static_cast<int64_t>(value.as_dict().entries.size()));
    if (value.is_undefined()) return Value(int64_t{0});
    type_error("object of type '" + value.type_name() + "' has no len()");
  }
  if (name == "tojson") return Value(json_dumps(value, tojson_options(a)));
  if (name == "string") return Value(value.str());
  if (name == "safe") return Value(value.str());
  if (name == "escape" || name == "e") return Value(html_escape(value.str()));
  if (name == "lower") return Value(ascii_map(value.str(), [](int c) { return std::tolower(c); }));
  if (name == "upper") return Value(ascii_map(value.str(), [](int c) { return std::toupper(c); }));
  if (name == "capitalize") return Value(capitalize(value.str()));
  if (name == "title") return Value(title(value.str()));
  if (name == "replace") {
    return Value(py_replace(value.str(), string_arg(a, 0, "old", ""), string_arg(a, 1, "new", ""),
                            int_arg(a, 2, "count", -1)));
  }
  if (name == "first") {
    List items = value.iterate();
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    List items = value.iterate();
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "join") {
    std::string sep = string_arg(a, 0, "d", "");
    const Value* attribute = arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& v : value.iterate()) {
      out += (first ? "" : sep) + (attribute ? item_attribute(v, attribute->str()) : v).str();
      first = false;
    }
    return Value(out);
  }
  if (name == "list") return Value(value.iterate());
  if (name == "items") {
    if (value.is_undefined()) return Value(List{});
    if (!value.is_dict()) type_error("Can only get item pairs from a mapping.");
    return dict_method(value, "items").as_callable().fn(CallArgs{});
  }
  if (name == "selectattr" || name == "rejectattr") return select_items(value, a, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_items(value, a, false, name == "select");
  if (name == "map") {
    List out;
    const Value* attribute = nullptr;
    for (const auto& [k, v] : a.keyword) {
      if (k == "attribute") attribute = &v;
    }
    const Value* fallback = nullptr;
    for (const auto& [k, v] : a.keyword) {
      if (k == "default") fallback = &v;
    }
    for (const Value& item : value.iterate()) {
      if (attribute) {
        Value got = item_attribute(item, attribute->str());
        out.push_back(got.is_undefined() && fallback ? *fallback : got);
      } else {
        if (a.positional.empty()) type_error("map requires a filter name or attribute=");
        out.push_back(apply_filter(a.positional[0].str(), item, shift_args(a, 1)));
      }
    }
    return Value(std::move(out));
  }
  if (name == "int") return to_int(value, a);
  if (name == "float") {
    if (value.is_number()) return Value(value.as_float());
    try {
      return Value(std::stod(value.str()));
    } catch (const std::exception&) {
      return arg(a, 0, "default") ? *arg(a, 0, "default") : Value(0.0);
    }
  }
  if (name == "abs") {
    if (value.is_float()) return Value(std::fabs(value.as_float()));
    if (value.is_int() || value.is_bool()) return Value(value.as_int() < 0 ? -value.as_int() : value.as_int());
    type_error("bad operand type for abs(): '" + value.type_name() + "'");
  }
  if (name == "reverse") {
    if (value.is_string()) return get_slice(value, Value(nullptr), Value(nullptr), Value(int64_t{-1}));
    List items = value.iterate();
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& v : value.iterate()) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& w) { return w.equals(v); })) out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (name == "sort") {
    List items = value.iterate();
    bool reverse = arg(a, 0, "reverse") && arg(a, 0, "reverse")->truthy();
    const Value* attribute = arg(a, 2, "attribute");
    auto key = [&](const Value& v) { return attribute ? item_attribute(v, attribute->str()) : v; };
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? compare_values(key(y), key(x)) < 0 : compare_values(key(x), key(y)) < 0;
    });
    return Value(std::move(items));
  }
  if (name == "sum" || name == "min" || name == "max") {
    List items = value.iterate();
    if (name == "sum") {
      Value total(int64_t{0});
      for (const Value& v : items) {
        if (!v.is_number())
          type_error("unsupported operand type(s) for +: '" + total.type_name() + "' and '" + v.type_name() + "'");
        total = total.is_float() || v.is_float() ? Value(total.as_float() + v.as_float())
                                                 : Value(total.as_int() + v.as_int());
      }
      return total;
    }
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    Value best = items[0];
    for (const Value& v : items) {
      int c = compare_values(v, best);
      if (name == "min" ? c < 0 : c > 0) best = v;
    }
    return best;
  }
  type_error("no filter named '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  auto other = [&]() -> const Value& {
    const Value* o = arg(a, 0, "other");
    if (!o) type_error("test '" + name + "' needs an argument");
    return *o;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // jinja2's Undefined has a length and iterates (as empty), so it passes these two.
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "equalto" || name == "eq" || name == "==") return v.equals(other());
  if (name == "ne" || name == "!=") return !v.equals(other());
  if (name == "sameas") {  // identity; for the immutable values templates compare, same type and value
    const Value& o = other();
    return v.type_name() == o.type_name() && v.equals(o);
  }
  if (name == "in") return contains(other(), v);
  if (name == "lt" || name == "<") return compare_values(v, other()) < 0;
  if (name == "le" || name == "<=") return compare_values(v, other()) <= 0;
  if (name == "gt" || name == ">") return compare_values(v, other()) > 0;
  if (name == "ge" || name == ">=") return compare_values(v, other()) >= 0;
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) type_error("test '" + name + "' needs an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = other().as_int();
    if (d == 0) type_error("integer division or modulo by zero");
    return v.as_int() % d == 0;
  }
  if (name == "lower" || name == "upper") {
    std::string s = v.str();
    bool cased = false;
    for (unsigned char c : s) {
      if (std::isalpha(c)) {
        cased = true;
        if ((name == "lower") != static_cast<bool>(std::islower(c))) return false;
      }
    }
    return cased;
  }
  type_error("no test named '" + name + "'");
}

}  // namespace zinc::jinja
