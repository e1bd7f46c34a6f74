// Where a streamed reply's text is printed. A plain reply goes to stdout as it comes,
// tags and all (a Qwen model's <think> block included). A gpt-oss reply in harmony is
// split by channel as it streams: the answer goes to stdout and the reasoning to
// stderr, opened by a "[thinking]" line and closed by a blank line, so no tags show
// and stdout holds the answer alone (`zinc run ... > answer.txt`).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "text/harmony_splitter.h"

namespace zinc::cli {

class ReplyRouter {
 public:
  using Sink = std::function<void(std::string_view)>;
  // out: stdout's text; err: stderr's. Called in the order the text is to appear.
  ReplyRouter(bool harmony, Sink out, Sink err);
  void push(std::string_view piece);
  void finish();  // end of the reply: what the splitter held back, and the block closed

  // The reply so far: its answer (a plain reply's whole text) and its reasoning.
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  void route(const text::HarmonyText& split);

  Sink out_, err_;
  std::optional<text::HarmonySplitter> splitter_;  // none for a plain reply
  std::string content_, reasoning_;
  bool thinking_open_ = false;  // stderr is inside a "[thinking]" block
};

}  // namespace zinc::cli
