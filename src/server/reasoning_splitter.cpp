// Reasoning / answer split of thinking models' output (see reasoning_splitter.h).
#include "server/reasoning_splitter.h"

#include <algorithm>

namespace zinc::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest tail of `text` that is a proper prefix of `tag`.
size_t partial_tag_tail(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

bool all_whitespace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool in_reasoning, bool may_open)
    : state_(in_reasoning ? State::Reasoning : may_open ? State::MaybeOpen : State::Content) {}

void ReasoningSplitter::emit_reasoning(std::string_view text, SplitText& out) {
  if (!reasoning_started_) {
    const size_t start = text.find_first_not_of('\n');
    if (start == std::string_view::npos) return;
    text.remove_prefix(start);
    reasoning_started_ = true;
  }
  // Trailing newlines wait: they are dropped if </think> follows them.
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string_view::npos) {
    pending_newlines_.append(text);
    return;
  }
  out.reasoning += pending_newlines_;
  pending_newlines_.clear();
  out.reasoning.append(text.substr(0, end + 1));
  pending_newlines_.append(text.substr(end + 1));
}

void ReasoningSplitter::emit_content(std::string_view text, SplitText& out) {
  if (!content_started_) {
    const size_t start = text.find_first_not_of('\n');
    if (start == std::string_view::npos) return;
    text.remove_prefix(start);
    content_started_ = true;
  }
  out.content.append(text);
}

SplitText ReasoningSplitter::push(std::string_view piece) {
  SplitText out;
  held_.append(piece);
  for (;;) {
    if (state_ == State::MaybeOpen) {
      const size_t start = held_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return out;  // only whitespace so far
      const std::string_view rest = std::string_view(held_).substr(start);
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
      if (rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, start + kOpen.size());
        state_ = State::Reasoning;
      } else {
        state_ = State::Content;
      }
      continue;
    }
    if (state_ == State::Content) {
      emit_content(held_, out);
      held_.clear();
      return out;
    }
    // Reasoning: look for the closing tag.
    const size_t close = held_.find(kClose);
    if (close != std::string::npos) {
      emit_reasoning(std::string_view(held_).substr(0, close), out);
      pending_newlines_.clear();
      held_.erase(0, close + kClose.size());
      state_ = State::Content;
      continue;
    }
    const size_t keep = partial_tag_tail(held_, kClose);
    emit_reasoning(std::string_view(held_).substr(0, held_.size() - keep), out);
    held_.erase(0, held_.size() - keep);
    return out;
  }
}

SplitText ReasoningSplitter::flush() {
  SplitText out;
  if (state_ == State::Reasoning) {
    emit_reasoning(held_, out);
  } else if (!all_whitespace(held_) || state_ == State::Content) {
    emit_content(held_, out);
  }
  held_.clear();
  pending_newlines_.clear();
  return out;
}

}  // namespace zinc::server
