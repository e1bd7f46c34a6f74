// Splits a gpt-oss reply, written in OpenAI's harmony format, into reasoning, answer
// and tool calls. The prompt ends with `<|start|>assistant`, so the reply is one or
// more messages
//   [ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ [<|constrain|>]TYPE]<|message|>BODY<|end|>
// each later one opened by `<|start|>assistant`, the last one ended by <|return|> or
// <|call|>. Those two end generation and are never streamed, so the end of the output
// ends a message too. Where each body goes:
//   analysis                               -> reasoning
//   final, commentary with no recipient    -> content (commentary: preambles meant for the user)
//   recipient functions.NAME, tools on     -> a tool call (the body is its JSON arguments)
//   any other recipient (built-in tools)   -> reasoning (not meant for the user)
// Two messages that land in the same field are joined by a blank line. Headers and
// tags never reach the client: a tail that could begin a tag is held back. A reply
// that does not start like a harmony message (a grammar forced its text) is all content.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zinc::text {

// Whether a chat template speaks harmony (gpt-oss's writes `<|channel|>`).
inline bool is_harmony_template(std::string_view chat_template) {
  return chat_template.find("<|channel|>") != std::string_view::npos;
}

// Where a message body ends in `text`: the offset of the first of <|end|>, <|return|>,
// <|call|> and <|start|> (a missing <|end|>: it also opens the next header) and that
// tag, or npos and an empty tag.
std::pair<size_t, std::string_view> harmony_body_end(std::string_view text);
// The word after `key` (`<|channel|>`, ` to=`) in a message header, up to a space or the
// next tag; empty when absent.
std::string_view harmony_header_field(std::string_view header, std::string_view key);

struct HarmonyCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};
struct HarmonyText {
  std::string reasoning;
  std::string content;
  std::vector<HarmonyCall> calls;  // calls completed by this piece
};

class HarmonySplitter {
 public:
  // tools: messages to functions.NAME become tool calls (off: they are reasoning).
  explicit HarmonySplitter(bool tools) : tools_(tools) {}

  HarmonyText push(std::string_view piece);
  HarmonyText flush();  // end of output: ends the open message, drops an unfinished header

 private:
  enum class State { Start, Header, Body, Plain };
  enum class Target { Reasoning, Content, Call };
  void open_message(std::string_view header);
  void emit(std::string_view text, HarmonyText& out);
  void end_message(HarmonyText& out);

  bool tools_;
  State state_ = State::Start;
  std::string held_;  // a header being read, or a body's tail that may begin a tag
  Target target_ = Target::Content;
  std::string call_name_, call_body_;
  bool message_wrote_ = false;  // the open message put text into its field
  bool reasoning_wrote_ = false, content_wrote_ = false;
};

}  // namespace zinc::text
