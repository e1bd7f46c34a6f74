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
#include <string>
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

// A LogitsProcessor that masks every token whose bytes cannot continue a string of the
// grammar; the eog ids are allowed only once the grammar is complete (and then are the
// only tokens allowed if nothing can continue). Control tokens are never allowed except
// eog. The tokenizer must outlive it.
std::unique_ptr<LogitsProcessor> make_grammar_processor(std::shared_ptr<const Grammar> grammar,
                                                        const Tokenizer& tokenizer, std::vector<int32_t> eog_ids);

}  // namespace zinc::text
