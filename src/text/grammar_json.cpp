// JSON and JSON-schema grammars (see grammar.h for the supported subset).
//
// Whitespace between tokens is allowed but bounded (kMaxWhitespace bytes in a row),
// so a model cannot loop on spaces forever; that still fits a newline and the
// indentation of pretty-printed JSON a few levels deep. Strings are valid UTF-8 with
// valid escapes (no lone surrogates), and numbers fit a double: at most 18 integer
// digits and a two-digit exponent.
#include "text/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "text/grammar_rules.h"

namespace zinc::text {
namespace {

using json = nlohmann::ordered_json;
using Sequence = GrammarBuilder::Sequence;
using Symbol = GrammarBuilder::Symbol;

constexpr int kMaxWhitespace = 16;
constexpr int kMaxIntegerDigits = 18;  // any such integer fits an int64

// Keywords that only annotate: they never change what matches.
const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "format", "$schema", "$id", "$comment", "$anchor",
    "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$defs", "definitions"};
const std::set<std::string> kSupported = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength"};

class SchemaCompiler {
 public:
  Grammar compile(const std::vector<JsonChoice>& choices, const std::optional<FreePassage>& free_passage) {
    using B = GrammarBuilder;
    std::vector<Sequence> alts;
    for (const JsonChoice& choice : choices) {
      root_ = &choice.schema;
      refs_.clear();  // a $ref points into its own choice's schema
      const int32_t value = schema(choice.schema, "#");
      alts.push_back(B::concat({lit(choice.prefix), {ws(), ref(value), ws()}, lit(choice.suffix)}));
    }
    int32_t root = b_.rule("root", std::move(alts));
    if (free_passage) {
      Symbol free_byte = B::range(0, 0xff);
      free_byte.bytes.reset(static_cast<uint8_t>(kSpecialTokenMark));  // no special token inside
      const int32_t text = b_.repeat("free-text", free_byte, 0, -1);
      const int32_t passage =
          b_.rule("free-passage", {B::concat({lit(free_passage->open), {ref(text)}, lit(free_passage->close)})});
      root = b_.rule("after-free-passage", {{ref(root)}, {ref(passage), ref(root)}});
    }
    return std::move(b_).build(root);
  }

 private:
  static Symbol ref(int32_t rule) { return GrammarBuilder::ref(rule); }
  static Sequence lit(std::string_view s) { return GrammarBuilder::literal(s); }

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw std::invalid_argument("JSON schema at " + path + ": " + what);
  }

  // ---- building blocks ----------------------------------------------------------------
  Symbol ws() {
    if (ws_ < 0) {
      const Symbol space = GrammarBuilder::bytes(" \t\n\r");
      ws_ = b_.repeat("ws", space, 0, kMaxWhitespace);
    }
    return ref(ws_);
  }
  Sequence separator() { return {ws(), GrammarBuilder::byte(','), ws()}; }

  // One character inside a string: printable ASCII but '"' and '\', a valid UTF-8
  // sequence, or an escape (a \u surrogate only as a high-low pair).
  Symbol string_char() {
    if (char_ >= 0) return ref(char_);
    using B = GrammarBuilder;
    const Symbol cont = B::range(0x80, 0xbf);
    Symbol plain = B::range(0x20, 0x7f);
    plain.bytes.reset('"').reset('\\');
    const Symbol hex = B::bytes("0123456789abcdefABCDEF");
    const int32_t unicode = b_.rule(
        "unicode-escape",
        {{B::bytes("0123456789abcABC"), hex, hex, hex},
         {B::bytes("dD"), B::range('0', '7'), hex, hex},
         {B::bytes("eEfF"), hex, hex, hex},
         B::concat({{B::bytes("dD"), B::bytes("89abAB"), hex, hex}, lit("\\u"),
                    {B::bytes("dD"), B::bytes("cdefCDEF"), hex, hex}})});
    char_ = b_.rule("char", {{plain},
                             {B::range(0xc2, 0xdf), cont},
                             {B::byte(0xe0), B::range(0xa0, 0xbf), cont},
                             {B::range(0xe1, 0xec), cont, cont},
                             {B::byte(0xed), B::range(0x80, 0x9f), cont},
                             {B::range(0xee, 0xef), cont, cont},
                             {B::byte(0xf0), B::range(0x90, 0xbf), cont, cont},
                             {B::range(0xf1, 0xf3), cont, cont, cont},
                             {B::byte(0xf4), B::range(0x80, 0x8f), cont, cont},
                             {B::byte('\\'), B::bytes("\"\\/bfnrt")},
                             {B::byte('\\'), B::byte('u'), ref(unicode)}});
    return ref(char_);
  }
  int32_t string(int64_t min_length, int64_t max_length) {
    const auto key = std::make_pair(min_length, max_length);
    if (auto it = strings_.find(key); it != strings_.end()) return it->second;
    const int32_t chars = b_.repeat("chars", string_char(), min_length, max_length);
    return strings_[key] = b_.rule("string", {{GrammarBuilder::byte('"'), ref(chars), GrammarBuilder::byte('"')}});
  }
  int32_t number(bool integer) {
    int32_t& cached = integer ? integer_ : number_;
    if (cached >= 0) return cached;
    using B = GrammarBuilder;
    const Symbol digit = B::range('0', '9');
    const int32_t more_digits = b_.repeat("int-digits", digit, 0, kMaxIntegerDigits - 1);
    const int32_t int_part = b_.rule("int-part", {{B::byte('0')}, {B::range('1', '9'), ref(more_digits)}});
    const int32_t sign = b_.rule("sign", {{}, {B::byte('-')}});
    if (integer) return cached = b_.rule("integer", {{ref(sign), ref(int_part)}});
    const int32_t fraction_digits = b_.repeat("fraction-digits", digit, 1, -1);
    const int32_t fraction = b_.rule("fraction", {{}, {B::byte('.'), ref(fraction_digits)}});
    const int32_t exponent_sign = b_.rule("exponent-sign", {{}, {B::bytes("+-")}});
    const int32_t exponent_digits = b_.repeat("exponent-digits", digit, 1, 2);
    const int32_t exponent = b_.rule("exponent", {{}, {B::bytes("eE"), ref(exponent_sign), ref(exponent_digits)}});
    return cached = b_.rule("number", {{ref(sign), ref(int_part), ref(fraction), ref(exponent)}});
  }
  int32_t literal_rule(const std::string& name, const std::vector<std::string>& texts) {
    std::vector<Sequence> alts;
    for (const std::string& t : texts) alts.push_back(lit(t));
    return b_.rule(name, std::move(alts));
  }
  int32_t any_value() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = b_.new_rule("value");
    const int32_t value = any_value_;
    for (int32_t r : {object(nullptr, "#"), array(nullptr, "#"), string(0, -1), number(false),
                      literal_rule("literal", {"true", "false", "null"})})
      b_.add(value, {ref(r)});
    return value;
  }

  // ---- schemas ------------------------------------------------------------------------
  int32_t schema(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "schema false matches nothing");
      return any_value();
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, _] : s.items())
      if (!kSupported.count(key) && !kAnnotations.count(key)) fail(path, "unsupported keyword '" + key + "'");

    if (s.contains("$ref")) {
      only_with(s, path, "$ref", {});
      return reference(s["$ref"], path);
    }
    if (s.contains("const")) return literal_rule("const", {s["const"].dump()});
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail(path + "/enum", "must be a non-empty array");
      std::vector<std::string> texts;
      for (const json& v : s["enum"]) texts.push_back(v.dump());
      return literal_rule("enum", texts);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      only_with(s, path, key, {});
      const json& subs = s[key];
      if (!subs.is_array() || subs.empty()) fail(path + "/" + key, "must be a non-empty array");
      std::vector<Sequence> alts;
      for (size_t i = 0; i < subs.size(); ++i)
        alts.push_back({ref(schema(subs[i], path + "/" + key + "/" + std::to_string(i)))});
      return b_.rule(key, std::move(alts));
    }
    if (s.contains("allOf")) return all_of(s, path);

    if (s.contains("type")) {
      const json& type = s["type"];
      if (type.is_string()) return typed(s, type.get<std::string>(), path);
      if (!type.is_array() || type.empty()) fail(path + "/type", "must be a string or a non-empty array");
      std::vector<Sequence> alts;
      for (const json& t : type) {
        if (!t.is_string()) fail(path + "/type", "must list type names");
        alts.push_back({ref(typed(s, t.get<std::string>(), path))});
      }
      return b_.rule("types", std::move(alts));
    }
    // No type: the keywords say which one, else any value.
    for (const char* key : {"properties", "required", "additionalProperties"})
      if (s.contains(key)) return typed(s, "object", path);
    for (const char* key : {"items", "prefixItems", "minItems", "maxItems"})
      if (s.contains(key)) return typed(s, "array", path);
    for (const char* key : {"minLength", "maxLength"})
      if (s.contains(key)) return typed(s, "string", path);
    return any_value();
  }

  // `key` may appear only beside annotations and `allowed`.
  static void only_with(const json& s, const std::string& path, const std::string& key,
                        const std::set<std::string>& allowed) {
    for (const auto& [k, _] : s.items())
      if (k != key && !kAnnotations.count(k) && !allowed.count(k))
        fail(path, "unsupported keyword '" + k + "' beside '" + key + "'");
  }

  const json& resolve(const json& ref_value, const std::string& path) const {
    if (!ref_value.is_string()) fail(path + "/$ref", "must be a string");
    const std::string target = ref_value.get<std::string>();
    if (target.empty() || target[0] != '#')
      fail(path + "/$ref", "only local references (#/...) are supported: " + target);
    try {
      return root_->at(json::json_pointer(target.substr(1)));
    } catch (const json::exception&) {
      fail(path + "/$ref", "cannot resolve " + target);
    }
  }

  int32_t reference(const json& ref_value, const std::string& path) {
    const json& target = resolve(ref_value, path);
    const std::string name = ref_value.get<std::string>();
    if (auto it = refs_.find(name); it != refs_.end()) return it->second;
    // Named before it is compiled, so a recursive schema refers back to it.
    const int32_t rule = refs_[name] = b_.new_rule("ref " + name);
    b_.add(rule, {ref(schema(target, name))});
    return rule;
  }

  // allOf: merges object schemas (properties, required, additionalProperties); a single
  // subschema of any kind is that subschema.
  int32_t all_of(const json& s, const std::string& path) {
    const json& subs = s["allOf"];
    if (!subs.is_array() || subs.empty()) fail(path + "/allOf", "must be a non-empty array");
    bool other = false;
    for (const auto& [k, _] : s.items()) other |= k != "allOf" && !kAnnotations.count(k);
    if (subs.size() == 1 && !other) return schema(subs[0], path + "/allOf/0");
    json merged = json::object();
    merged["type"] = "object";
    auto merge = [&](const json& part, const std::string& part_path) {
      const json* p = &part;
      for (int hops = 0; p->is_object() && p->contains("$ref"); ++hops) {
        if (hops > 32) fail(part_path, "$ref chain too long");
        p = &resolve((*p)["$ref"], part_path);
      }
      if (!p->is_object()) fail(part_path, "allOf supports object schemas only");
      for (const auto& [k, v] : p->items()) {
        if (kAnnotations.count(k) || k == "allOf" || k == "$ref") continue;
        if (k == "type") {
          if (v != "object") fail(part_path, "allOf supports object schemas only");
        } else if (k == "properties") {
          for (const auto& [name, prop] : v.items()) {
            if (merged["properties"].contains(name) && merged["properties"][name] != prop)
              fail(part_path + "/properties/" + name, "allOf gives this property two different schemas");
            merged["properties"][name] = prop;
          }
        } else if (k == "required") {
          for (const json& name : v)
            if (!merged.contains("required") ||
                std::find(merged["required"].begin(), merged["required"].end(), name) == merged["required"].end())
              merged["required"].push_back(name);
        } else if (k == "additionalProperties") {
          if (merged.contains(k) && merged[k] != v) fail(part_path, "allOf gives two different additionalProperties");
          merged[k] = v;
        } else {
          fail(part_path, "unsupported keyword '" + k + "' in allOf (objects only)");
        }
      }
    };
    for (size_t i = 0; i < subs.size(); ++i) merge(subs[i], path + "/allOf/" + std::to_string(i));
    merge(s, path);
    return typed(merged, "object", path);
  }

  static int64_t count(const json& s, const char* key, int64_t fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(path + "/" + key, "must be a non-negative integer");
    return v.get<int64_t>();
  }

  int32_t typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "object") return object(&s, path);
    if (type == "array") return array(&s, path);
    if (type == "string") {
      const int64_t min = count(s, "minLength", 0, path), max = count(s, "maxLength", -1, path);
      if (max >= 0 && max < min) fail(path, "maxLength < minLength");
      return string(min, max);
    }
    if (type == "number") return number(false);
    if (type == "integer") return number(true);
    if (type == "boolean") return literal_rule("boolean", {"true", "false"});
    if (type == "null") return literal_rule("null", {"null"});
    fail(path + "/type", "unknown type '" + type + "'");
  }

  // An object: the listed properties in order (the required ones always), then, when
  // allowed, any others. s == nullptr: any object.
  int32_t object(const json* s, const std::string& path) {
    struct Member {
      std::string name;
      int32_t value;
      bool required;
    };
    std::vector<Member> members;
    int32_t additional = -1;  // the value rule of other properties; -1: none allowed
    std::set<std::string> required;
    if (s && s->contains("required")) {
      const json& req = (*s)["required"];
      if (!req.is_array()) fail(path + "/required", "must be an array");
      for (const json& name : req) {
        if (!name.is_string()) fail(path + "/required", "must list property names");
        required.insert(name.get<std::string>());
      }
    }
    const bool has_properties = s && s->contains("properties");
    if (has_properties) {
      const json& props = (*s)["properties"];
      if (!props.is_object()) fail(path + "/properties", "must be an object");
      for (const auto& [name, prop] : props.items())
        members.push_back({name, schema(prop, path + "/properties/" + name), required.count(name) > 0});
    }
    if (s && s->contains("additionalProperties")) {
      const json& extra = (*s)["additionalProperties"];
      if (!(extra.is_boolean() && !extra.get<bool>())) additional = schema(extra, path + "/additionalProperties");
    } else if (!has_properties) {
      additional = any_value();
    }
    for (const std::string& name : required) {
      bool listed = false;
      for (const Member& m : members) listed |= m.name == name;
      if (listed) continue;
      if (additional < 0) fail(path + "/required", "'" + name + "' is required but cannot appear");
      members.push_back({name, additional, true});
    }

    using B = GrammarBuilder;
    // tail(i, first): members i.. where `first` means none is written yet, so no comma
    // comes before the next and at least one must come (the empty object is its own
    // alternative, so two whitespace runs never meet). -1: nothing can come.
    std::map<std::pair<size_t, bool>, int32_t> tails;
    std::function<int32_t(size_t, bool)> tail = [&](size_t i, bool first) -> int32_t {
      if (auto it = tails.find({i, first}); it != tails.end()) return it->second;
      const Sequence lead = first ? Sequence{} : separator();
      int32_t r = -1;
      if (i == members.size()) {
        if (!first || additional >= 0) r = b_.new_rule("members-rest");
        if (!first) b_.add(r, {});
        if (additional >= 0) {
          const Sequence member = {ref(string(0, -1)), ws(), B::byte(':'), ws(), ref(additional)};
          // After one extra member the rest is the same as with first == false.
          b_.add(r, B::concat({lead, member, {ref(first ? tail(i, false) : r)}}));
        }
      } else {
        r = b_.new_rule("member " + members[i].name);
        const Sequence member =
            B::concat({lit(json(members[i].name).dump()), {ws(), B::byte(':'), ws(), ref(members[i].value)}});
        b_.add(r, B::concat({lead, member, {ref(tail(i + 1, false))}}));
        const int32_t skip = members[i].required ? -1 : tail(i + 1, first);
        if (skip >= 0) b_.add(r, {ref(skip)});
      }
      return tails[{i, first}] = r;
    };
    std::vector<Sequence> alts;
    bool any_required = false;
    for (const Member& m : members) any_required |= m.required;
    if (!any_required) alts.push_back({B::byte('{'), ws(), B::byte('}')});
    if (const int32_t body = tail(0, true); body >= 0)
      alts.push_back({B::byte('{'), ws(), ref(body), ws(), B::byte('}')});
    return b_.rule("object", std::move(alts));
  }

  // An array: prefixItems, then items, between minItems and maxItems of them.
  // s == nullptr: any array.
  int32_t array(const json* s, const std::string& path) {
    std::vector<int32_t> prefix;
    int32_t rest = -1;  // the rule of items past the prefix; -1: none allowed
    int64_t min = 0, max = -1;
    if (s) {
      if (s->contains("prefixItems")) {
        const json& items = (*s)["prefixItems"];
        if (!items.is_array()) fail(path + "/prefixItems", "must be an array");
        for (size_t i = 0; i < items.size(); ++i)
          prefix.push_back(schema(items[i], path + "/prefixItems/" + std::to_string(i)));
      }
      if (s->contains("items")) {
        const json& items = (*s)["items"];
        if (!(items.is_boolean() && !items.get<bool>())) rest = schema(items, path + "/items");
      } else {
        rest = any_value();
      }
      min = count(*s, "minItems", 0, path);
      max = count(*s, "maxItems", -1, path);
    } else {
      rest = any_value();
    }
    if (rest < 0) max = max < 0 ? static_cast<int64_t>(prefix.size()) : std::min<int64_t>(max, prefix.size());
    if (max >= 0 && max < min) fail(path, "no array length satisfies minItems, maxItems and items");
    auto item = [&](int64_t j) { return j < static_cast<int64_t>(prefix.size()) ? prefix[j] : rest; };

    using B = GrammarBuilder;
    // after[j]: the rest of the array once j >= 1 items are written.
    const int64_t loop_from = std::max<int64_t>({1, min, static_cast<int64_t>(prefix.size())});
    std::vector<int32_t> after;
    for (int64_t j = 1; j <= (max < 0 ? loop_from : max); ++j) after.push_back(b_.new_rule("items-rest"));
    for (int64_t j = 1; j <= static_cast<int64_t>(after.size()); ++j) {
      const int32_t r = after[j - 1];
      if (j >= min) b_.add(r, {});
      if (max < 0 && j == loop_from) {
        b_.add(r, B::concat({separator(), {ref(item(j)), ref(r)}}));
      } else if (max < 0 || j < max) {
        b_.add(r, B::concat({separator(), {ref(item(j)), ref(after[j])}}));
      }
    }
    std::vector<Sequence> alts;
    if (min == 0) alts.push_back({B::byte('['), ws(), B::byte(']')});
    if (max != 0) alts.push_back({B::byte('['), ws(), ref(item(0)), ref(after[0]), ws(), B::byte(']')});
    return b_.rule("array", std::move(alts));
  }

  const json* root_ = nullptr;  // the schema being compiled
  GrammarBuilder b_;
  int32_t ws_ = -1, char_ = -1, number_ = -1, integer_ = -1, any_value_ = -1;
  std::map<std::pair<int64_t, int64_t>, int32_t> strings_;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::ordered_json& schema, std::string prefix,
                                                       std::string suffix) {
  return grammar_from_json_choices({{std::move(prefix), schema, std::move(suffix)}});
}

std::shared_ptr<const Grammar> grammar_from_json_choices(const std::vector<JsonChoice>& choices,
                                                        const std::optional<FreePassage>& free_passage) {
  return std::make_shared<const Grammar>(SchemaCompiler().compile(choices, free_passage));
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> grammar = grammar_from_json_schema({{"type", "object"}});
  return grammar;
}

}  // namespace zinc::text
