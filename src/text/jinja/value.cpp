// Python semantics for the Jinja value model: truthiness, str(), repr(), ==,
// iteration, float formatting and json.dumps.
#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace zinc::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(nullptr);
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& item : j) l.push_back(from_json(item));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.entries.emplace_back(k, from_json(v));
      return Value(std::move(d));
    }
    default: throw TemplateError("unsupported JSON value in template context");
  }
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

std::string Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  if (is_namespace()) return "Namespace";
  return "function";
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_float() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !as_list().empty();
  if (is_dict()) return !as_dict().entries.empty();
  return true;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then Python's 'r' layout:
  // positional notation for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      int_part.append(exponent + 1 - int_part.size(), '0');
      std::string frac = digits.size() > static_cast<size_t>(exponent + 1) ? digits.substr(exponent + 1) : "0";
      out += int_part + "." + frac;
    } else {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  }
  return out;
}

static std::string repr_string(const std::string& s) {
  // Python prefers single quotes unless the text holds a ' and no ".
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return python_float_repr(as_float());
  return repr();
}

std::string Value::repr() const {
  if (is_string()) return repr_string(as_string());
  if (is_list()) {
    std::string out = tuple_ ? "(" : "[";
    const List& l = as_list();
    for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i].repr();
    if (tuple_ && l.size() == 1) out += ",";
    return out + (tuple_ ? ")" : "]");
  }
  if (is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : as_dict().entries) {
      out += (first ? "" : ", ") + repr_string(k) + ": " + v.repr();
      first = false;
    }
    return out + "}";
  }
  if (is_namespace()) return "<Namespace " + Value(as_namespace().attrs).repr() + ">";
  if (is_callable()) return "<function " + as_callable().name + ">";
  if (is_undefined()) return "Undefined";
  return str();
}

bool Value::equals(const Value& other) const {
  if (is_undefined() || other.is_undefined()) return is_undefined() && other.is_undefined();
  if (is_number() && other.is_number()) {
    if ((is_float() || other.is_float())) return as_float() == other.as_float();
    return as_int() == other.as_int();
  }
  if (is_none() || other.is_none()) return is_none() && other.is_none();
  if (is_string() && other.is_string()) return as_string() == other.as_string();
  if (is_list() && other.is_list()) {
    const List& a = as_list();
    const List& b = other.as_list();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].equals(b[i])) return false;
    }
    return true;
  }
  if (is_dict() && other.is_dict()) {
    const Dict& a = as_dict();
    const Dict& b = other.as_dict();
    if (a.entries.size() != b.entries.size()) return false;
    for (const auto& [k, v] : a.entries) {
      const Value* w = b.find(k);
      if (!w || !v.equals(*w)) return false;
    }
    return true;
  }
  if (is_namespace() && other.is_namespace()) return &as_namespace() == &other.as_namespace();
  if (is_callable() && other.is_callable()) return &as_callable() == &other.as_callable();
  return false;
}

List Value::iterate() const {
  if (is_undefined()) return {};  // jinja2's Undefined iterates as empty
  if (is_list()) return as_list();
  if (is_dict()) {
    List keys;
    for (const auto& [k, v] : as_dict().entries) keys.emplace_back(k);
    return keys;
  }
  if (is_string()) {
    List chars;
    for (auto& cp : utf8_code_points(as_string())) chars.emplace_back(std::move(cp));
    return chars;
  }
  throw TemplateError("'" + type_name() + "' object is not iterable");
}

std::vector<std::string> utf8_code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

static uint32_t decode_code_point(const std::string& cp) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(cp[i])); };
  switch (cp.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
    case 3: return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
  }
}

static void dump_json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (const std::string& cp : utf8_code_points(s)) {
    uint32_t c = decode_code_point(cp);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
          if (c >= 0x10000) {  // a surrogate pair, as Python writes it
            uint32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
          }
          out += buf;
        } else {
          out += cp;
        }
    }
  }
  out += '"';
}

static void dump_json(const Value& v, const JsonDumpOptions& o, int depth, std::string& out) {
  auto newline = [&](int d) {
    if (!o.has_indent) return;
    out += '\n';
    for (int i = 0; i < d; ++i) out += o.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    double d = v.as_float();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
  } else if (v.is_string()) {
    dump_json_string(v.as_string(), o.ensure_ascii, out);
  } else if (v.is_list()) {
    const List& l = v.as_list();
    if (l.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      dump_json(l[i], o, depth + 1, out);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    auto entries = v.as_dict().entries;
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (o.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      dump_json_string(entries[i].first, o.ensure_ascii, out);
      out += o.key_separator;
      dump_json(entries[i].second, o, depth + 1, out);
    }
    newline(depth);
    out += '}';
  } else {
    throw TemplateError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  dump_json(v, options, 0, out);
  return out;
}

}  // namespace zinc::jinja
