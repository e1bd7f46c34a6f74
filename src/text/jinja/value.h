// The value model of the Jinja interpreter: Python-like dynamic values (undefined,
// none, bool, int, float, str, list, dict, namespace, callable) with Python's
// truthiness, str(), repr() and equality, plus json.dumps-compatible serialisation.
// Lists, dicts and namespaces are shared by reference, as Python objects are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinc::jinja {

// Any failure while lexing, parsing or rendering a template.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
using List = std::vector<Value>;

// An insertion-ordered str -> Value map (Python dicts keep insertion order).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// jinja2's namespace(): a bag of attributes that `set ns.x = ...` may change.
struct Namespace {
  Dict attrs;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The positional argument at i, else the keyword `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> fn;
};

struct Undefined {
  std::string hint;  // why it is undefined, for the error raised when it is used
};

class Value {
 public:
  using Storage = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                               std::shared_ptr<List>, std::shared_ptr<Dict>,
                               std::shared_ptr<Namespace>, std::shared_ptr<Callable>>;

  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<Dict>(std::move(d))) {}
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  // A Python tuple: a list that prints as (a, b).
  static Value tuple(List items);
  static Value function(std::string name, std::function<Value(const CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is a number
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }  // lists and tuples
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(v_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Callable>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;   // int or bool
  double as_float() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python's name of the type ('str', 'int', 'dict', ...), for error messages.
  std::string type_name() const;
  bool truthy() const;
  // Python str(): what {{ value }} prints (undefined prints nothing).
  std::string str() const;
  // Python repr(), used for the items of printed lists and dicts.
  std::string repr() const;
  // Python ==.
  bool equals(const Value& other) const;
  // The items `for x in value` visits; throws for values that are not iterable.
  List iterate() const;

 private:
  Storage v_;
  bool tuple_ = false;
};

// Python's repr() of a float ("1.0", "0.1", "1e+16").
std::string python_float_repr(double d);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as Python writes it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // used when has_indent
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

// UTF-8 helpers: Python indexes strings by code point.
std::vector<std::string> utf8_code_points(const std::string& s);

}  // namespace zinc::jinja
