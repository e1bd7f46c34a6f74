// Grammars from JSON schemas: which texts they accept and reject, and the schemas
// they refuse. (Token-level masks on a real vocabulary: grammar_vocab_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/grammar_rules.h"

namespace zinc::text {
namespace {

using json = nlohmann::ordered_json;

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accepts(text);
}

std::shared_ptr<const Grammar> schema(const std::string& text, std::string prefix = "", std::string suffix = "") {
  return grammar_from_json_schema(json::parse(text), std::move(prefix), std::move(suffix));
}

// The message of the invalid_argument that compiling `text` throws ("" if none).
std::string schema_error(const std::string& text) {
  try {
    schema(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Grammar, JsonObjectAcceptsObjects) {
  const auto g = json_object_grammar();
  for (const char* ok : {R"({})", R"({"a": 1, "b": [true, null, {"c": "x"}], "d": -0.5e+10})",
                         " { \"a\" : \"\xc3\xa9\\u00e9\\ud83d\\ude00\xf0\x9f\x98\x80\" } ",
                         "{\n  \"a\": {\n    \"b\": [\n      1,\n      2\n    ]\n  }\n}",
                         R"({"e": "\"\\\/\b\f\n\r\t", "n": 0, "m": -12.250E-07, "x": []})", R"({"a":{"a":{"a":{}}}})"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
}

TEST(Grammar, JsonObjectRejectsEverythingElse) {
  const auto g = json_object_grammar();
  for (const char* bad : {"", "[]", R"("x")", "1", R"({"a": 01})", R"({"a": })", "{'a': 1}", R"({"a": 1,})",
                          R"({"a" 1})", "{}x", R"({"a": "\ud800"})", R"({"a": "\udc00"})", R"({"a": "\x"})",
                          "{\"a\": \"\x01\"}", "{\"a\": \"\xc0\x80\"}", "{\"a\": \"\xed\xa0\x80\"}",
                          "{\"a\": \"\xff\"}", R"({"a": 1.})", R"({"a": .5})", R"({"a": 1e})", R"({"a": 1e100})",
                          R"({"a": tru})", R"({"a": "x)", R"({1: 2})"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  // Whitespace is bounded: 16 bytes in a row, not 17.
  EXPECT_TRUE(accepts(g, "{" + std::string(16, ' ') + "}"));
  EXPECT_FALSE(accepts(g, "{" + std::string(17, ' ') + "}"));
}

TEST(Grammar, PropertiesInOrderRequiredAndNoOthers) {
  const auto g = schema(R"({"type": "object", "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 3},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["name"]})");
  for (const char* ok : {R"({"name": "x"})", R"({"name": "abc", "age": -7})", R"({"name": "\u00e9", "tags": []})",
                         "{\"name\": \"\xc3\xa9\xc3\xa9\xc3\xa9\"}", R"({"name":"ab","age":0,"tags":["a","b"]})"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {R"({})", R"({"age": 1})", R"({"name": ""})", R"({"name": "abcd"})",
                          R"({"age": 1, "name": "x"})", R"({"name": "x", "other": 1})", R"({"name": "x", "age": 1.5})",
                          R"({"name": "x", "tags": ["a", "b", "c"]})", R"({"name": "x", "tags": [1]})",
                          R"({"name": "x",, "age": 1})", R"({"name": "x" "age": 1})"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Grammar, AdditionalProperties) {
  const auto typed = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                                "additionalProperties": {"type": "boolean"}})");
  EXPECT_TRUE(accepts(typed, R"({"a": 1, "x": true, "y": false})"));
  EXPECT_TRUE(accepts(typed, R"({"x": true})"));
  EXPECT_FALSE(accepts(typed, R"({"a": 1, "x": 1})"));
  const auto any = schema(R"({"type": "object", "additionalProperties": true, "required": ["id"]})");
  EXPECT_TRUE(accepts(any, R"({"id": [1, {"k": null}], "z": "q"})"));
  EXPECT_FALSE(accepts(any, R"({})"));
  const auto none = schema(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(accepts(none, "{}"));
  EXPECT_FALSE(accepts(none, R"({"a": 1})"));
  const auto free = schema(R"({"type": "object"})");  // no properties listed: any object
  EXPECT_TRUE(accepts(free, R"({"a": {"b": [1, 2.5, "c"]}})"));
}

TEST(Grammar, EnumConstAnyOfAndTypeLists) {
  const auto e = schema(R"({"enum": ["red", "green", 3, null, {"k": [1]}]})");
  for (const char* ok : {R"("red")", R"("green")", "3", "null", R"({"k":[1]})"}) EXPECT_TRUE(accepts(e, ok)) << ok;
  for (const char* bad : {R"("blue")", "4", R"({"k": [2]})"}) EXPECT_FALSE(accepts(e, bad)) << bad;
  const auto c = schema(R"({"const": "get_weather"})");
  EXPECT_TRUE(accepts(c, R"("get_weather")"));
  EXPECT_FALSE(accepts(c, R"("get_weathe")"));
  const auto any_of = schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}], "title": "t"})");
  EXPECT_TRUE(accepts(any_of, "12"));
  EXPECT_TRUE(accepts(any_of, R"("a")"));
  EXPECT_FALSE(accepts(any_of, R"("ab")"));
  EXPECT_FALSE(accepts(any_of, "1.5"));
  const auto types = schema(R"({"type": ["number", "null", "boolean"]})");
  for (const char* ok : {"1.5", "null", "true", "-2e-9"}) EXPECT_TRUE(accepts(types, ok)) << ok;
  EXPECT_FALSE(accepts(types, R"("x")"));
  const auto one_of = schema(R"({"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "integer"}}]})");
  EXPECT_TRUE(accepts(one_of, "[1, 2]"));
  EXPECT_TRUE(accepts(one_of, "null"));
}

TEST(Grammar, Numbers) {
  const auto integer = schema(R"({"type": "integer"})");
  for (const char* ok : {"0", "-0", "7", "-123", "123456789012345678"}) EXPECT_TRUE(accepts(integer, ok)) << ok;
  for (const char* bad : {"1.5", "1e5", "01", "-", "+1", "1234567890123456789"})
    EXPECT_FALSE(accepts(integer, bad)) << bad;
  const auto number = schema(R"({"type": "number"})");
  for (const char* ok : {"0.5", "-1.25e-3", "1E+99", "3e7", "0.000001"}) EXPECT_TRUE(accepts(number, ok)) << ok;
  for (const char* bad : {"1.", ".5", "1e", "1e123", "00", "- 1", "NaN", "Infinity"})
    EXPECT_FALSE(accepts(number, bad)) << bad;
}

TEST(Grammar, RecursiveRefsToDefs) {
  const auto g = schema(R"({"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
      "$ref": "#/$defs/node"})");
  EXPECT_TRUE(accepts(g, R"({"v": 1})"));
  EXPECT_TRUE(accepts(g, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4, "kids": []}]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v": 1, "kids": [{"w": 2}]})"));
  const auto legacy =
      schema(R"({"definitions": {"x": {"type": "boolean"}}, "type": "array", "items": {"$ref": "#/definitions/x"}})");
  EXPECT_TRUE(accepts(legacy, "[true, false]"));
  EXPECT_FALSE(accepts(legacy, "[1]"));
}

TEST(Grammar, ArraysWithPrefixItemsAndCounts) {
  const auto g = schema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                            "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4})");
  for (const char* ok : {R"(["a"])", R"(["a", 1])", R"(["a", 1, true])", R"(["a", 1, true, false])"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"[]", R"([1])", R"(["a", "b"])", R"(["a", 1, 2])", R"(["a", 1, true, false, true])"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  const auto closed = schema(R"({"prefixItems": [{"type": "null"}], "items": false})");
  EXPECT_TRUE(accepts(closed, "[null]"));
  EXPECT_TRUE(accepts(closed, "[]"));
  EXPECT_FALSE(accepts(closed, "[null, null]"));
  const auto counted = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2})");
  EXPECT_FALSE(accepts(counted, "[1]"));
  EXPECT_TRUE(accepts(counted, "[1, 2, 3, 4, 5, 6]"));
}

TEST(Grammar, AllOfMergesObjects) {
  const auto g = schema(
      R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
      "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}, "required": ["name"]}]})");
  EXPECT_TRUE(accepts(g, R"({"id": 1, "name": "n"})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1})"));
  EXPECT_FALSE(accepts(g, R"({"name": "n"})"));
  const auto single = schema(R"({"allOf": [{"type": "string"}], "description": "pydantic wraps refs so"})");
  EXPECT_TRUE(accepts(single, R"("s")"));
}

TEST(Grammar, LiteralTextAroundTheJson) {
  const auto g = schema(R"({"type": "object", "properties": {"name": {"const": "f"}, "arguments": {"type": "object"}},
                            "required": ["name", "arguments"]})",
                        "<tool_call>\n", "\n</tool_call>");
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "{\"name\": \"f\", \"arguments\": {}}"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}"));
}

TEST(Grammar, ChoicesEachWithTheirOwnTextAndSchema) {
  const auto g = grammar_from_json_choices(
      {{"a:", json::parse(R"({"$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}})"), ";"},
       {"b:", json::parse(R"({"$ref": "#/$defs/n", "$defs": {"n": {"type": "string"}}})"), ""}});
  EXPECT_TRUE(accepts(g, "a:1;"));
  EXPECT_TRUE(accepts(g, "b:\"x\""));
  EXPECT_FALSE(accepts(g, "a:\"x\";"));  // each $ref resolves in its own choice's schema
  EXPECT_FALSE(accepts(g, "b:1"));
  EXPECT_FALSE(accepts(g, "a:1"));
}

TEST(Grammar, AFreePassageMayComeFirst) {
  const std::string end = special_token("<|end|>");
  const auto g = grammar_from_json_choices({{"call:", json::parse(R"({"type": "object"})"), ""}},
                                           FreePassage{"think:", end});
  EXPECT_TRUE(accepts(g, "call:{}"));
  EXPECT_TRUE(accepts(g, "think:" + end + "call:{}"));
  EXPECT_TRUE(accepts(g, "think:any <|end|> text, {\"x\": \xc3\xa9" + end + "call:{}"));
  EXPECT_FALSE(accepts(g, "think:a" + end + "b" + end + "call:{}"));  // no special token inside
  EXPECT_FALSE(accepts(g, "think:a" + end));
  EXPECT_FALSE(accepts(g, "think:a<|end|>call:{}"));  // text spelling the tag is not the tag
}

TEST(Grammar, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(schema_error(R"({"type": "string", "pattern": "^a"})").find("'pattern'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}})")
                .find("#/properties/n: unsupported keyword 'minimum'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"not": {"type": "null"}})").find("'not'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "date"})").find("unknown type 'date'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref": "#/$defs/missing"})").find("cannot resolve"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref": "http://x/y.json"})").find("only local"), std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf": [{"type": "object"}, {"type": "string"}]})").find("object schemas only"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "array", "minItems": 3, "maxItems": 2})").find("minItems"), std::string::npos);
  EXPECT_NE(schema_error("false").find("matches nothing"), std::string::npos);
  EXPECT_NE(schema_error(R"({"anyOf": [{"type": "null"}], "type": "null"})").find("beside 'anyOf'"), std::string::npos);
  // Annotations are fine.
  EXPECT_EQ(schema_error(R"({"type": "string", "title": "t", "description": "d", "default": "x", "examples": ["y"],
                             "format": "date-time", "$schema": "https://json-schema.org/draft/2020-12/schema"})"),
            "");
}

TEST(Grammar, BuilderRefusesLeftRecursion) {
  GrammarBuilder b;
  const int32_t list = b.new_rule("list");
  const int32_t maybe = b.rule("maybe", {{}, {GrammarBuilder::byte('x')}});
  b.add(list, {GrammarBuilder::ref(maybe), GrammarBuilder::ref(list), GrammarBuilder::byte('a')});
  b.add(list, {GrammarBuilder::byte('a')});
  try {
    std::move(b).build(list);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'list' is left-recursive"), std::string::npos) << e.what();
  }
}

TEST(Grammar, AmbiguousGrammarsKeepEveryParse) {
  // "a"* "a" "b" | "a" "a"*: both parses stay alive until the end decides.
  GrammarBuilder b;
  const int32_t as = b.repeat("as", GrammarBuilder::byte('a'), 0, -1);
  const int32_t root = b.rule("root", {{GrammarBuilder::ref(as), GrammarBuilder::byte('a'), GrammarBuilder::byte('b')},
                                       {GrammarBuilder::byte('a'), GrammarBuilder::ref(as)}});
  const auto g = std::make_shared<const Grammar>(std::move(b).build(root));
  for (const char* ok : {"ab", "aaab", "a", "aaaa"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"", "b", "aba", "abb"}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

}  // namespace
}  // namespace zinc::text
