// tokenizer.json -> tokenizer.ggml.* metadata.
#include "text/hf_vocab.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "text/pretokenize.h"
#include "text/tokenizer.h"

namespace zinc::text {

namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

// The pre-tokenizer steps as a flat list (a Sequence is unrolled).
std::vector<json> steps_of(const json& node, const char* list_key) {
  if (node.is_null()) return {};
  if (node.value("type", "") == "Sequence") return node.at(list_key).get<std::vector<json>>();
  return {node};
}

bool has_step(const std::vector<json>& steps, std::string_view type) {
  for (const json& s : steps)
    if (s.value("type", "") == type) return true;
  return false;
}

// Names a byte-level pre-tokenizer the way llama.cpp does, from its structure.
std::string byte_level_pre_name(const json& pre_tokenizer) {
  std::vector<json> steps = steps_of(pre_tokenizer, "pretokenizers");
  auto is_byte_level = [](const json& s, bool regex) {
    return s.value("type", "") == "ByteLevel" && s.value("use_regex", true) == regex;
  };
  if (steps.size() == 1 && is_byte_level(steps[0], true)) return "gpt2";
  if (steps.size() == 2 && steps[0].value("type", "") == "Digits" && steps[0].value("individual_digits", false) &&
      is_byte_level(steps[1], true))
    return "smollm";
  if (steps.size() == 2 && steps[0].value("type", "") == "Split" && is_byte_level(steps[1], false) &&
      steps[0].contains("pattern") && steps[0]["pattern"].contains("Regex")) {
    std::string regex = steps[0]["pattern"]["Regex"].get<std::string>();
    for (const char* name : {"llama-bpe", "qwen2", "qwen35", "gpt-4o"})
      if (PreTokenizer::regexes_of(name) == std::vector<std::string>{regex}) return name;
    throw std::runtime_error("unrecognised pre-tokenizer regex: " + regex);
  }
  throw std::runtime_error("unrecognised byte-level pre-tokenizer: " + pre_tokenizer.dump());
}

// tokenizer_config.json names special tokens as a string or {"content": ...}.
std::optional<std::string> special_token_text(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return std::nullopt;
}

std::string chat_template_of(const json& config) {
  if (!config.contains("chat_template")) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {  // named templates: take "default"
    for (const json& entry : t)
      if (entry.value("name", "") == "default") return entry.value("template", "");
  }
  return "";
}

// A boolean setting; absent or null means false.
bool flag(const json& config, const char* key) {
  return config.contains(key) && config[key].is_boolean() && config[key].get<bool>();
}

bool is_byte_token_text(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

}  // namespace

void add_hf_vocab(const std::string& hf_dir, gguf::GgufWriter& writer) {
  const std::filesystem::path dir(hf_dir);
  json tokenizer = read_json(dir / "tokenizer.json");
  json config = std::filesystem::exists(dir / "tokenizer_config.json") ? read_json(dir / "tokenizer_config.json")
                                                                        : json::object();
  const json& model = tokenizer.at("model");
  if (model.value("type", "") != "BPE")
    throw std::runtime_error("tokenizer.json: model type '" + model.value("type", "") +
                             "' is not supported (BPE only)");

  // Tokens by id: the model's vocab, then added tokens (which may extend it).
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto place = [&](int64_t id, const std::string& text, TokenType type) {
    if (id < 0 || id > (1 << 24)) throw std::runtime_error("tokenizer.json: token id out of range");
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(id + 1);
      types.resize(id + 1, static_cast<int32_t>(TokenType::Undefined));
    }
    tokens[id] = text;
    types[id] = static_cast<int32_t>(type);
  };
  for (const auto& [text, id] : model.at("vocab").items()) place(id.get<int64_t>(), text, TokenType::Normal);

  const json& pre_tokenizer = tokenizer.value("pre_tokenizer", json());
  const json& decoder = tokenizer.value("decoder", json());
  const bool byte_level = has_step(steps_of(pre_tokenizer, "pretokenizers"), "ByteLevel") ||
                          has_step(steps_of(decoder, "decoders"), "ByteLevel");
  const bool byte_fallback = model.value("byte_fallback", false);
  if (!byte_level && !byte_fallback && !has_step(steps_of(decoder, "decoders"), "Replace"))
    throw std::runtime_error("tokenizer.json: neither byte-level nor SentencePiece-style BPE");

  if (!byte_level) {
    for (size_t id = 0; id < tokens.size(); ++id)
      if (types[id] == static_cast<int32_t>(TokenType::Normal) && is_byte_token_text(tokens[id]))
        types[id] = static_cast<int32_t>(TokenType::Byte);
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = model["vocab"].find(model["unk_token"].get<std::string>());
    if (it != model["vocab"].end()) types[it->get<int64_t>()] = static_cast<int32_t>(TokenType::Unknown);
  }
  for (const json& added : tokenizer.value("added_tokens", json::array())) {
    int64_t id = added.at("id").get<int64_t>();
    bool is_unknown = static_cast<size_t>(id) < types.size() && types[id] == static_cast<int32_t>(TokenType::Unknown);
    TokenType type = is_unknown ? TokenType::Unknown
                     : added.value("special", false) ? TokenType::Control
                                                     : TokenType::UserDefined;
    place(id, added.at("content").get<std::string>(), type);
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == static_cast<int32_t>(TokenType::Undefined)) {  // a hole in the id space
      tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = static_cast<int32_t>(TokenType::Unused);
    }
  }

  std::vector<std::string> merges;
  merges.reserve(model.at("merges").size());
  for (const json& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {
      std::string s = m.get<std::string>();
      size_t space = s.find(' ', 1);
      if (space == std::string::npos) throw std::runtime_error("tokenizer.json: bad merge '" + s + "'");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      left = m.at(0).get<std::string>(), right = m.at(1).get<std::string>();
    }
    // GGUF spells a merge "left right"; a space inside a part would make that ambiguous.
    if (right.find(' ') != std::string::npos || left.find(' ', 1) != std::string::npos)
      throw std::runtime_error("tokenizer.json: merge part contains a space: '" + left + "' '" + right + "'");
    merges.push_back(left + " " + right);
  }

  auto id_of = [&](const std::optional<std::string>& text) -> std::optional<int32_t> {
    if (!text) return std::nullopt;
    for (size_t id = 0; id < tokens.size(); ++id)
      if (tokens[id] == *text) return static_cast<int32_t>(id);
    return std::nullopt;
  };

  if (byte_level) {
    writer.set_string("tokenizer.ggml.model", "gpt2");
    writer.set_string("tokenizer.ggml.pre", byte_level_pre_name(pre_tokenizer));
  } else {
    writer.set_string("tokenizer.ggml.model", "llama");
    writer.set_string("tokenizer.ggml.pre", "default");
    // A Prepend("▁") normalizer or a prefixing Metaspace is sentencepiece's add_dummy_prefix.
    bool prefix = tokenizer.value("normalizer", json()).dump().find("\"Prepend\"") != std::string::npos;
    for (const json& s : steps_of(pre_tokenizer, "pretokenizers"))
      if (s.value("type", "") == "Metaspace" && s.value("prepend_scheme", "always") != "never") prefix = true;
    writer.set_bool("tokenizer.ggml.add_space_prefix", prefix);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  if (!byte_level) {
    for (size_t id = 0; id < tokens.size(); ++id)
      if (types[id] == static_cast<int32_t>(TokenType::Normal)) scores[id] = -static_cast<float>(id);
  }
  const std::pair<const char*, const char*> special_keys[] = {
      {"bos_token", "tokenizer.ggml.bos_token_id"},
      {"eos_token", "tokenizer.ggml.eos_token_id"},
      {"unk_token", "tokenizer.ggml.unknown_token_id"},
      {"pad_token", "tokenizer.ggml.padding_token_id"},
  };
  std::vector<std::pair<const char*, int32_t>> special_ids;
  for (const auto& [config_key, gguf_key] : special_keys)
    if (std::optional<int32_t> id = id_of(special_token_text(config, config_key)))
      special_ids.emplace_back(gguf_key, *id);

  writer.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  if (!byte_level) writer.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  writer.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  writer.set_string_array("tokenizer.ggml.merges", std::move(merges));
  for (const auto& [key, id] : special_ids) writer.set_u32(key, static_cast<uint32_t>(id));
  writer.set_bool("tokenizer.ggml.add_bos_token", flag(config, "add_bos_token"));
  writer.set_bool("tokenizer.ggml.add_eos_token", flag(config, "add_eos_token"));
  if (std::string chat_template = chat_template_of(config); !chat_template.empty())
    writer.set_string("tokenizer.chat_template", std::move(chat_template));
}

void write_hf_vocab_gguf(const std::string& hf_dir, const std::string& out_path) {
  gguf::GgufWriter writer;
  add_hf_vocab(hf_dir, writer);
  writer.write_file(out_path, [](size_t, uint8_t*) {});
}

}  // namespace zinc::text
