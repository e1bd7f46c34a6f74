// Grammar-constrained sampling: the next token may only be one whose bytes continue
// a string of a context-free grammar (JSON, a JSON schema, a tool call's JSON).
//
// A Grammar is compiled once and shared (immutable). make_grammar_processor gives
// each request its own parser state as a LogitsProcessor for the engine; the masks
// come from walking the vocabulary's byte trie from the current parser state, once
// per distinct state (see grammar_processor.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "text/tokenizer.h"

namespace zinc::text {

class Grammar;  // a compiled context-free grammar over bytes (UTF-8)

// Any JSON value whose top level is an object (response_format json_object).
std::shared_ptr<const Grammar> json_object_grammar();

// JSON matching `schema` (draft 2020-12 subset: type incl. arrays of types, properties,
// required, additionalProperties (false/true/schema), items, prefixItems, minItems/maxItems,
// enum, const, anyOf/oneOf, allOf of objects, $ref to #/$defs|definitions, string
// minLength/maxLength, number/integer, boolean, null; annotations (title, description,
// default, examples, format, ...) ignored). Objects list their properties in the schema's
// order; when `properties` is given and additionalProperties is absent, no others.
// Optional literal text before and after the JSON (e.g. "<tool_call>\n" ... "\n</tool_call>").
// Throws std::invalid_argument naming the unsupported keyword and its path.
std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::ordered_json& schema,
                                                       std::string prefix = "", std::string suffix = "");

// A grammar names a special (control) token by special_token(its text): the mark is a
// byte no UTF-8 text holds, so only that token matches it, never normal tokens that
// spell the same text. A processor matches only the special tokens it is given.
inline constexpr char kSpecialTokenMark = '\xff';
inline std::string special_token(std::string_view text) { return kSpecialTokenMark + std::string(text); }

// One JSON value of several kinds, each with its own literal text around it (a call per
// tool, say): one of `choices`. `free_passage`, when given, may come first: its `open`,
// then any text without a special token, then its `close` (a model's reasoning, say).
// Throws as grammar_from_json_schema does.
struct JsonChoice {
  std::string prefix;
  nlohmann::ordered_json schema;
  std::string suffix;
};
struct FreePassage {
  std::string open, close;
};
std::shared_ptr<const Grammar> grammar_from_json_choices(const std::vector<JsonChoice>& choices,
                                                        const std::optional<FreePassage>& free_passage = std::nullopt);

// A LogitsProcessor that masks every token whose bytes cannot continue a string of the
// grammar; the eog ids are allowed only once the grammar is complete (and then are the
// only tokens allowed if nothing can continue). Control tokens are never allowed except
// eog and `special_ids`, which match special_token(text). The tokenizer must outlive it.
std::unique_ptr<LogitsProcessor> make_grammar_processor(std::shared_ptr<const Grammar> grammar,
                                                        const Tokenizer& tokenizer, std::vector<int32_t> eog_ids,
                                                        std::vector<int32_t> special_ids = {});

}  // namespace zinc::text
