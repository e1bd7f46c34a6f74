// The syntax tree the parser builds and the interpreter walks. One node type for
// expressions and one for statements; the kind says which fields are used.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace zinc::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // literal
    Name,      // name
    GetAttr,   // operands[0].name
    GetItem,   // operands[0][operands[1]]
    Slice,     // operands[0][operands[1]:operands[2]:operands[3]] (each bound may be null)
    Call,      // operands[0](operands[1..], keywords)
    Filter,    // operands[0] | name(operands[1..], keywords)
    Test,      // operands[0] is [not] name(operands[1..])
    Unary,     // name in {"-", "+", "not"} applied to operands[0]
    Binary,    // operands[0] name operands[1]; name is the operator, incl. "and", "or", "in", "not in"
    Cond,      // operands[0] if operands[1] else operands[2] (else may be null)
    List,      // [operands...]
    Tuple,     // (operands...) or a, b
    Dict,      // {operands[0]: operands[1], ...}
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when the parameter has no default
};

struct Stmt {
  enum class Kind {
    Text,       // text
    Output,     // {{ expr }}
    If,         // branches: conditions[i] -> bodies[i]; an extra body without condition is the else
    For,        // for targets in expr [if filter]: bodies[0], else bodies[1]
    Set,        // set targets = expr, or set target.attribute = expr
    SetBlock,   // set targets[0] %} bodies[0] {% endset
    Macro,      // macro name(params): bodies[0]
    CallBlock,  // call expr: bodies[0] is what caller() renders
    Break,
    Continue,
    Scope,      // a block that only renders bodies[0] (transformers' {% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::string attribute;  // Set: the namespace attribute assigned, when not empty
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<MacroParam> params;
};

}  // namespace zinc::jinja
