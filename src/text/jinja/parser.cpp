// Recursive-descent parser for the Jinja subset chat templates use. Expression
// precedence follows jinja2 (lowest first): x if c else y, or, and, not,
// comparisons / in, + -, ~, * / // %, **, unary - +, then postfix (. [] ()) and
// filters / tests (| and is).
#include "text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "text/jinja/lexer.h"

namespace zinc::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().kind != TokenKind::End) fail("unexpected '" + peek().value + "'");
    return body;
  }

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError("line " + std::to_string(peek().line) + ": " + what);
  }

  bool is_op(const std::string& op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Operator && peek(ahead).value == op;
  }
  bool is_name(const std::string& name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).value == name;
  }
  bool skip_op(const std::string& op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(const std::string& name) {
    if (!is_name(name)) return false;
    ++pos_;
    return true;
  }
  void expect_op(const std::string& op) {
    if (!skip_op(op)) fail("expected '" + op + "'");
  }
  void expect_kind(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what);
    ++pos_;
  }
  std::string expect_identifier() {
    if (peek().kind != TokenKind::Name) fail("expected a name");
    return next().value;
  }

  static ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }
  static ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::Binary, a->line, std::move(op));
    e->operands.push_back(std::move(a));
    e->operands.push_back(std::move(b));
    return e;
  }

  // ---- statements ------------------------------------------------------------

  // Parses until a {% name %} with name in `ends`; leaves pos_ at that name.
  Body parse_body(std::initializer_list<const char*> ends) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (ends.size() != 0) fail(std::string("unexpected end of template, expected '{% ") + *ends.begin() + " %}'");
        return body;
      }
      if (t.kind == TokenKind::Text) {
        auto s = make_stmt(Stmt::Kind::Text, t.line);
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::VarBegin) {
        next();
        auto s = make_stmt(Stmt::Kind::Output, t.line);
        s->expr = parse_expression();
        expect_kind(TokenKind::VarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::BlockBegin) {
        const Token& keyword = peek(1);
        if (keyword.kind != TokenKind::Name) {
          next();
          fail("expected a statement name after '{%'");
        }
        for (const char* end : ends) {
          if (keyword.value == end) {
            next();
            return body;
          }
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected '" + t.value + "'");
      }
    }
  }

  static StmtPtr make_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  void end_tag(const char* name) {
    if (!skip_name(name)) fail(std::string("expected '") + name + "'");
    expect_kind(TokenKind::BlockEnd, "'%}'");
  }

  StmtPtr parse_statement() {
    const Token& keyword = next();
    const std::string& k = keyword.value;
    if (k == "if") return parse_if(keyword.line);
    if (k == "for") return parse_for(keyword.line);
    if (k == "set") return parse_set(keyword.line);
    if (k == "macro") return parse_macro(keyword.line);
    if (k == "call") return parse_call_block(keyword.line);
    if (k == "break" || k == "continue") {
      auto s = make_stmt(k == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, keyword.line);
      expect_kind(TokenKind::BlockEnd, "'%}'");
      return s;
    }
    if (k == "generation") {
      auto s = make_stmt(Stmt::Kind::Scope, keyword.line);
      expect_kind(TokenKind::BlockEnd, "'%}'");
      s->bodies.push_back(parse_body({"endgeneration"}));
      end_tag("endgeneration");
      return s;
    }
    --pos_;
    fail("unknown statement '" + k + "'");
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(Stmt::Kind::If, line);
    s->conditions.push_back(parse_expression());
    expect_kind(TokenKind::BlockEnd, "'%}'");
    while (true) {
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      const std::string& which = next().value;
      if (which == "elif") {
        s->conditions.push_back(parse_expression());
        expect_kind(TokenKind::BlockEnd, "'%}'");
      } else if (which == "else") {
        expect_kind(TokenKind::BlockEnd, "'%}'");
        s->bodies.push_back(parse_body({"endif"}));
        end_tag("endif");
        return s;
      } else {
        expect_kind(TokenKind::BlockEnd, "'%}'");
        return s;
      }
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    do {
      names.push_back(expect_identifier());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(Stmt::Kind::For, line);
    s->targets = parse_targets();
    if (!skip_name("in")) fail("expected 'in' in for loop");
    s->expr = parse_or();  // no conditional expression: a trailing 'if' filters the loop
    if (skip_name("if")) s->filter = parse_expression();
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_kind(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(parse_body({"else", "endfor"}));
    if (next().value == "else") {
      expect_kind(TokenKind::BlockEnd, "'%}'");
      s->bodies.push_back(parse_body({"endfor"}));
      end_tag("endfor");
    } else {
      expect_kind(TokenKind::BlockEnd, "'%}'");
    }
    return s;
  }

  StmtPtr parse_set(int line) {
    auto s = make_stmt(Stmt::Kind::Set, line);
    s->targets.push_back(expect_identifier());
    if (skip_op(".")) {
      s->attribute = expect_identifier();
    } else {
      while (skip_op(",")) s->targets.push_back(expect_identifier());
    }
    if (skip_op("=")) {
      s->expr = parse_tuple();
      expect_kind(TokenKind::BlockEnd, "'%}'");
      return s;
    }
    if (!s->attribute.empty() || s->targets.size() != 1) fail("expected '='");
    s->kind = Stmt::Kind::SetBlock;
    expect_kind(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(parse_body({"endset"}));
    end_tag("endset");
    return s;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!skip_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect_identifier();
      if (skip_op("=")) p.default_value = parse_expression();
      params.push_back(std::move(p));
    }
    return params;
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(Stmt::Kind::Macro, line);
    s->name = expect_identifier();
    s->params = parse_params();
    expect_kind(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(parse_body({"endmacro"}));
    end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(Stmt::Kind::CallBlock, line);
    if (is_op("(")) s->params = parse_params();
    s->expr = parse_expression();
    if (s->expr->kind != Expr::Kind::Call) fail("expected a call after 'call'");
    expect_kind(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(parse_body({"endcall"}));
    end_tag("endcall");
    return s;
  }

  // ---- expressions -----------------------------------------------------------

  // An expression, or several separated by commas (a tuple).
  ExprPtr parse_tuple() {
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto list = make(Expr::Kind::Tuple, first->line);
    list->operands.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == TokenKind::BlockEnd || peek().kind == TokenKind::VarEnd || is_op(")")) break;
      list->operands.push_back(parse_expression());
    }
    return list;
  }

  ExprPtr parse_expression() {
    ExprPtr value = parse_or();
    while (skip_name("if")) {
      auto cond = make(Expr::Kind::Cond, value->line);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression() : nullptr;
      cond->operands.push_back(std::move(value));
      cond->operands.push_back(std::move(test));
      cond->operands.push_back(std::move(otherwise));
      value = std::move(cond);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::Unary, next().line, "not");
      e->operands.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    while (true) {
      const Token& t = peek();
      std::string op;
      if (t.kind == TokenKind::Operator &&
          (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == "<=" || t.value == ">" ||
           t.value == ">=")) {
        op = next().value;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = binary(op, std::move(left), parse_math1());
    }
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().value;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(Expr::Kind::Unary, t.line, t.value);
      node->operands.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filters_and_tests(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.kind == TokenKind::Name) {
      next();
      if (t.value == "true" || t.value == "True") return literal(Value(true), t.line);
      if (t.value == "false" || t.value == "False") return literal(Value(false), t.line);
      if (t.value == "none" || t.value == "None") return literal(Value(nullptr), t.line);
      return make(Expr::Kind::Name, t.line, t.value);
    }
    if (t.kind == TokenKind::String) {
      std::string s;
      while (peek().kind == TokenKind::String) s += next().value;  // adjacent literals join
      return literal(Value(std::move(s)), t.line);
    }
    if (t.kind == TokenKind::Integer) {
      next();
      try {
        return literal(Value(static_cast<int64_t>(std::stoll(t.value))), t.line);
      } catch (const std::out_of_range&) {
        fail("integer literal out of range");
      }
    }
    if (t.kind == TokenKind::Float) {
      next();
      return literal(Value(std::stod(t.value)), t.line);
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(Expr::Kind::Tuple, t.line);
      ExprPtr inner = parse_tuple();
      expect_op(")");
      return inner;
    }
    if (skip_op("[")) {
      auto list = make(Expr::Kind::List, t.line);
      while (!skip_op("]")) {
        if (!list->operands.empty()) {
          expect_op(",");
          if (skip_op("]")) break;
        }
        list->operands.push_back(parse_expression());
      }
      return list;
    }
    if (skip_op("{")) {
      auto dict = make(Expr::Kind::Dict, t.line);
      while (!skip_op("}")) {
        if (!dict->operands.empty()) {
          expect_op(",");
          if (skip_op("}")) break;
        }
        dict->operands.push_back(parse_expression());
        expect_op(":");
        dict->operands.push_back(parse_expression());
      }
      return dict;
    }
    fail(t.kind == TokenKind::End ? "unexpected end of template" : "unexpected '" + t.value + "'");
  }

  static ExprPtr literal(Value v, int line) {
    auto e = make(Expr::Kind::Literal, line);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const Token& dot = next();
        if (peek().kind == TokenKind::Integer) {
          auto item = make(Expr::Kind::GetItem, dot.line);
          item->operands.push_back(std::move(node));
          item->operands.push_back(literal(Value(static_cast<int64_t>(std::stoll(next().value))), dot.line));
          node = std::move(item);
        } else {
          auto attr = make(Expr::Kind::GetAttr, dot.line, expect_identifier());
          attr->operands.push_back(std::move(node));
          node = std::move(attr);
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    int line = next().line;  // '['
    ExprPtr bounds[3];
    bool is_slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!is_op(":") && !is_op("]")) bounds[part] = parse_expression();
      if (part < 2 && skip_op(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::Slice : Expr::Kind::GetItem, line);
    e->operands.push_back(std::move(obj));
    if (!is_slice && !bounds[0]) fail("expected an index");
    for (int i = 0; i < (is_slice ? 3 : 1); ++i) e->operands.push_back(std::move(bounds[i]));
    return e;
  }

  // Fills node's operands (after those already there) and keywords from '(...)'.
  void parse_arguments(Expr& node) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      first = false;
      if (peek().kind == TokenKind::Name && is_op("=", 1)) {
        std::string key = next().value;
        next();
        node.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        node.operands.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = make(Expr::Kind::Call, callee->line);
    call->operands.push_back(std::move(callee));
    parse_arguments(*call);
    return call;
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        auto f = make(Expr::Kind::Filter, peek().line, expect_identifier());
        f->operands.push_back(std::move(node));
        if (is_op("(")) parse_arguments(*f);
        node = std::move(f);
      } else if (is_name("is")) {
        int line = next().line;
        bool negated = skip_name("not");
        auto t = make(Expr::Kind::Test, line, expect_identifier());
        t->negated = negated;
        t->operands.push_back(std::move(node));
        if (is_op("(")) {
          parse_arguments(*t);
        } else if (starts_bare_test_argument()) {
          t->operands.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // `x is divisibleby 3`: a test may take one argument without parentheses.
  bool starts_bare_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::Name) return t.value != "else" && t.value != "or" && t.value != "and";
    if (t.kind == TokenKind::String || t.kind == TokenKind::Integer || t.kind == TokenKind::Float) return true;
    return is_op("[") || is_op("{");
  }
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace zinc::jinja
