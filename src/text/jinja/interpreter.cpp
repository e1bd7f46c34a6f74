// Tree-walking evaluator for parsed Jinja templates (see interpreter.h).
//
// Scoping follows jinja2: a for loop body and a macro body get their own scope
// (so `set` inside a loop does not leak out, which is why templates use
// namespace()), while if-blocks share the enclosing one.
#include "text/jinja/interpreter.h"

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "text/jinja/builtins.h"

namespace zinc::jinja {
namespace {

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;

struct Scope {
  ScopePtr parent;
  std::unordered_map<std::string, Value> vars;

  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

[[noreturn]] void fail(const std::string& what) { throw TemplateError(what); }

// Adds "line N: " to errors that do not carry a line yet.
[[noreturn]] void rethrow_at(const TemplateError& e, int line) {
  std::string what = e.what();
  if (what.rfind("line ", 0) == 0) throw e;
  throw TemplateError("line " + std::to_string(line) + ": " + what);
}

void require_defined(const Value& v) {
  if (v.is_undefined()) fail(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

bool both_ints(const Value& a, const Value& b) { return (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool()); }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(out);
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  if (op == "+") {
    if (both_ints(a, b)) return Value(a.as_int() + b.as_int());
    if (a.is_number() && b.is_number()) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (both_ints(a, b)) return Value(a.as_int() * b.as_int());
    if (a.is_number() && b.is_number()) return Value(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_list()) && b.is_int()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_int()) return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  if (op == "-") return both_ints(a, b) ? Value(a.as_int() - b.as_int()) : Value(a.as_float() - b.as_float());
  if (op == "**") {
    if (both_ints(a, b) && b.as_int() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
      return Value(r);
    }
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  if (b.as_float() == 0.0) fail(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value(a.as_float() / b.as_float());
  if (both_ints(a, b)) {  // Python floors integer division and modulo
    int64_t x = a.as_int(), y = b.as_int();
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return op == "//" ? Value(q) : Value(x - q * y);
  }
  double x = a.as_float(), y = b.as_float();
  double q = std::floor(x / y);
  return op == "//" ? Value(q) : Value(x - q * y);
}

bool ordered(const std::string& op, const Value& a, const Value& b) {
  int c;
  if (a.is_number() && b.is_number()) {
    c = a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
  } else if (a.is_string() && b.is_string()) {
    int r = a.as_string().compare(b.as_string());
    c = r < 0 ? -1 : r > 0 ? 1 : 0;
  } else {
    require_defined(a);
    require_defined(b);
    fail("'" + op + "' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options) : options_(options) {}

  ScopePtr global_scope() {
    auto g = std::make_shared<Scope>();
    g->vars["raise_exception"] = Value::function("raise_exception", [](const CallArgs& a) -> Value {
      const Value* msg = a.get(0, "message");
      fail(msg ? msg->str() : "raise_exception() called");
    });
    g->vars["strftime_now"] =
        Value::function("strftime_now", [this](const CallArgs& a) { return Value(strftime_now(a)); });
    g->vars["namespace"] = Value::function("namespace", [](const CallArgs& a) {
      auto ns = std::make_shared<Namespace>();
      for (const Value& v : a.positional) {
        if (!v.is_dict()) fail("namespace() takes mappings as positional arguments");
        for (const auto& [k, x] : v.as_dict().entries) ns->attrs.set(k, x);
      }
      for (const auto& [k, v] : a.keyword) ns->attrs.set(k, v);
      return Value(ns);
    });
    g->vars["dict"] = Value::function("dict", [](const CallArgs& a) {
      Dict d;
      if (!a.positional.empty() && a.positional[0].is_dict()) d = a.positional[0].as_dict();
      for (const auto& [k, v] : a.keyword) d.set(k, v);
      return Value(std::move(d));
    });
    g->vars["range"] = Value::function("range", [](const CallArgs& a) {
      if (a.positional.empty() || a.positional.size() > 3) fail("range expected 1 to 3 arguments");
      for (const Value& v : a.positional) {
        if (!v.is_int()) fail("range() arguments must be integers");
      }
      int64_t start = a.positional.size() > 1 ? a.positional[0].as_int() : 0;
      int64_t stop = a.positional.size() > 1 ? a.positional[1].as_int() : a.positional[0].as_int();
      int64_t step = a.positional.size() > 2 ? a.positional[2].as_int() : 1;
      if (step == 0) fail("range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value(std::move(out));
    });
    return g;
  }

  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      Flow flow;
      try {
        flow = exec_one(*s, scope, out);
      } catch (const TemplateError& e) {
        rethrow_at(e, s->line);
      }
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

 private:
  const RenderOptions& options_;

  std::string strftime_now(const CallArgs& a) const {
    const Value* format = a.get(0, "format");
    if (!format || !format->is_string()) fail("strftime_now() needs a format string");
    std::tm tm{};
    if (options_.now) {
      tm = *options_.now;
    } else {
      std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      localtime_r(&t, &tm);
    }
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, format->as_string().c_str(), &tm);
    return std::string(buf, n);
  }

  Flow exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: out += eval(*s.expr, scope).str(); return Flow::Normal;
      case Stmt::Kind::If:
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i >= s.conditions.size() || eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        }
        return Flow::Normal;
      case Stmt::Kind::For: exec_for(s, scope, out); return Flow::Normal;
      case Stmt::Kind::Set: exec_set(s, scope); return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        std::string captured;
        exec(s.bodies[0], scope, captured);
        scope->vars[s.targets[0]] = Value(captured);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: scope->vars[s.name] = make_macro(s, scope); return Flow::Normal;
      case Stmt::Kind::CallBlock: out += exec_call_block(s, scope).str(); return Flow::Normal;
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
      case Stmt::Kind::Scope: return exec(s.bodies[0], scope, out);
    }
    return Flow::Normal;
  }

  static void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    List items = v.iterate();
    if (items.size() != targets.size()) {
      fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
           " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*s.expr, scope);
    if (iterable.is_none()) fail("'NoneType' object is not iterable");
    List items = iterable.iterate();
    if (s.filter) {
      List kept;
      for (const Value& item : items) {
        ScopePtr test_scope = child_of(scope);
        bind_targets(*test_scope, s.targets, item);
        if (eval(*s.filter, test_scope).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      ScopePtr body_scope = child_of(scope);
      bind_targets(*body_scope, s.targets, items[i]);
      Dict loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(n - i));
      loop.set("revindex0", Value(n - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == n - 1));
      loop.set("length", Value(n));
      loop.set("depth", Value(int64_t{1}));
      loop.set("depth0", Value(int64_t{0}));
      if (i > 0) loop.set("previtem", items[i - 1]);
      if (i + 1 < n) loop.set("nextitem", items[i + 1]);
      loop.set("cycle", Value::function("loop.cycle", [i](const CallArgs& a) {
        if (a.positional.empty()) fail("no items for cycling given");
        return a.positional[static_cast<size_t>(i) % a.positional.size()];
      }));
      body_scope->vars["loop"] = Value(std::move(loop));
      if (exec(s.bodies[0], body_scope, out) == Flow::Break) break;
    }
    if (n == 0 && s.bodies.size() > 1) exec(s.bodies[1], scope, out);
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v = eval(*s.expr, scope);
    if (s.attribute.empty()) {
      bind_targets(*scope, s.targets, v);
      return;
    }
    const Value* target = scope->lookup(s.targets[0]);
    if (!target || !target->is_namespace()) fail("cannot assign attribute on non-namespace object");
    target->as_namespace().attrs.set(s.attribute, std::move(v));
  }

  // A macro is a callable that renders its body in a scope under the one it was defined in.
  // The macro lives in that scope's variables, so it holds the scope weakly (a strong
  // reference would be a cycle that never frees); the renderer keeps the scope alive.
  Value make_macro(const Stmt& s, const ScopePtr& defined_in) {
    macro_scopes_.push_back(defined_in);
    std::weak_ptr<Scope> weak_scope = defined_in;
    return Value::function(s.name, [this, &s, weak_scope](const CallArgs& a) {
      ScopePtr scope = child_of(weak_scope.lock());
      if (a.positional.size() > s.params.size())
        fail("macro '" + s.name + "' takes " + std::to_string(s.params.size()) + " arguments");
      for (const auto& [k, v] : a.keyword) {
        bool known = k == "caller";
        for (const MacroParam& p : s.params) known = known || p.name == k;
        if (!known) fail("macro '" + s.name + "' takes no keyword argument '" + k + "'");
        if (k == "caller") scope->vars["caller"] = v;
      }
      for (size_t i = 0; i < s.params.size(); ++i) {
        const MacroParam& p = s.params[i];
        if (const Value* given = a.get(i, p.name)) {
          scope->vars[p.name] = *given;
        } else if (p.default_value) {
          scope->vars[p.name] = eval(*p.default_value, scope);
        } else {
          scope->vars[p.name] = Value::undefined("parameter '" + p.name + "' was not provided");
        }
      }
      std::string out;
      exec(s.bodies[0], scope, out);
      return Value(out);
    });
  }

  Value exec_call_block(const Stmt& s, const ScopePtr& scope) {
    const Expr& call = *s.expr;
    Value callee = eval(*call.operands[0], scope);
    CallArgs args = eval_args(call, 1, scope);
    args.keyword.emplace_back("caller", Value::function("caller", [this, &s, scope](const CallArgs& a) {
      ScopePtr body_scope = child_of(scope);
      for (size_t i = 0; i < s.params.size(); ++i) {
        const Value* given = a.get(i, s.params[i].name);
        body_scope->vars[s.params[i].name] =
            given ? *given : s.params[i].default_value ? eval(*s.params[i].default_value, body_scope) : Value();
      }
      std::string out;
      exec(s.bodies[0], body_scope, out);
      return Value(out);
    }));
    return call_value(callee, args);
  }

  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = first; i < e.operands.size(); ++i) args.positional.push_back(eval(*e.operands[i], scope));
    for (const auto& [k, v] : e.keywords) args.keyword.emplace_back(k, eval(*v, scope));
    return args;
  }

  static Value call_value(const Value& callee, const CallArgs& args) {
    require_defined(callee);
    if (!callee.is_callable()) fail("'" + callee.type_name() + "' object is not callable");
    return callee.as_callable().fn(args);
  }

 public:
  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_node(e, scope);
    } catch (const TemplateError& err) {
      rethrow_at(err, e.line);
    }
  }

 private:
  std::vector<ScopePtr> macro_scopes_;  // scopes that defined macros, alive for the whole render

  Value eval_node(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.literal;
      case Expr::Kind::Name: {
        const Value* v = scope->lookup(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::GetAttr: return get_attribute(eval(*e.operands[0], scope), e.name);
      case Expr::Kind::GetItem: return get_item(eval(*e.operands[0], scope), eval(*e.operands[1], scope));
      case Expr::Kind::Slice: {
        auto bound = [&](size_t i) { return e.operands[i] ? eval(*e.operands[i], scope) : Value(nullptr); };
        return get_slice(eval(*e.operands[0], scope), bound(1), bound(2), bound(3));
      }
      case Expr::Kind::Call: return call_value(eval(*e.operands[0], scope), eval_args(e, 1, scope));
      case Expr::Kind::Filter: return apply_filter(e.name, eval(*e.operands[0], scope), eval_args(e, 1, scope));
      case Expr::Kind::Test: {
        bool result = apply_test(e.name, eval(*e.operands[0], scope), eval_args(e, 1, scope));
        return Value(result != e.negated);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.operands[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        require_defined(v);
        if (!v.is_number()) fail("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::Binary: return eval_binary(e, scope);
      case Expr::Kind::Cond:
        if (eval(*e.operands[1], scope).truthy()) return eval(*e.operands[0], scope);
        return e.operands[2] ? eval(*e.operands[2], scope) : Value::undefined("the conditional expression has no else");
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List items;
        for (const ExprPtr& item : e.operands) items.push_back(eval(*item, scope));
        return e.kind == Expr::Kind::Tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
          Value key = eval(*e.operands[i], scope);
          if (!key.is_string()) fail("only string keys are supported in dict literals");
          d.set(key.as_string(), eval(*e.operands[i + 1], scope));
        }
        return Value(std::move(d));
      }
    }
    fail("unknown expression");
  }

  Value eval_binary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    Value a = eval(*e.operands[0], scope);
    if (op == "and") return a.truthy() ? eval(*e.operands[1], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.operands[1], scope);
    Value b = eval(*e.operands[1], scope);
    if (op == "~") return Value(a.str() + b.str());
    if (op == "==") return Value(a.equals(b));
    if (op == "!=") return Value(!a.equals(b));
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") return Value(ordered(op, a, b));
    return arithmetic(op, a, b);
  }
};

}  // namespace

std::string render(const Body& program, const Dict& context, const RenderOptions& options) {
  Renderer renderer(options);
  ScopePtr root = child_of(renderer.global_scope());
  for (const auto& [k, v] : context.entries) root->vars[k] = v;
  std::string out;
  renderer.exec(program, root, out);
  return out;
}

}  // namespace zinc::jinja
