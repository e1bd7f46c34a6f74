// Streamed reply routing (see reply_router.h).
#include "cli/text/reply_router.h"

#include <utility>

namespace zinc::cli {

ReplyRouter::ReplyRouter(bool harmony, Sink out, Sink err) : out_(std::move(out)), err_(std::move(err)) {
  if (harmony) splitter_.emplace(/*tools=*/false);  // chat and run offer no tools
}

void ReplyRouter::push(std::string_view piece) {
  if (!splitter_) {
    content_.append(piece);
    out_(piece);
    return;
  }
  // A piece may end one message and begin the next, and the splitter's result does
  // not say which came first. Cut before each tag, every part's text comes from one
  // message, so the answer and the reasoning are printed in the order they came.
  while (!piece.empty()) {
    const std::string_view part = piece.substr(0, piece.find("<|", 1));
    route(splitter_->push(part));
    piece.remove_prefix(part.size());
  }
}

void ReplyRouter::finish() {
  if (splitter_) route(splitter_->flush());
  if (thinking_open_) err_("\n");  // the reply ended while thinking: end its line
  thinking_open_ = false;
}

void ReplyRouter::route(const text::HarmonyText& split) {
  if (!split.reasoning.empty()) {
    // The "[thinking]" line starts a line of its own, after some answer too.
    if (!thinking_open_) err_(content_.empty() ? "[thinking]\n" : "\n[thinking]\n");
    thinking_open_ = true;
    err_(split.reasoning);
    reasoning_ += split.reasoning;
  }
  if (!split.content.empty()) {
    if (thinking_open_) err_("\n\n");  // a blank line between reasoning and answer
    thinking_open_ = false;
    out_(split.content);
    content_ += split.content;
  }
}

}  // namespace zinc::cli
