// Harmony reply split (see harmony_splitter.h).
#include "text/harmony_splitter.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

namespace zinc::text {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kStart = "<|start|>";
// What ends a body: the first three are dropped; <|start|> (a missing <|end|>) opens
// the next header.
constexpr std::array<std::string_view, 4> kBodyEnds = {"<|end|>", "<|return|>", "<|call|>", kStart};
// How the first header may begin: its channel, a recipient written after the role
// (which the prompt gave), or the role again.
constexpr std::array<std::string_view, 3> kFirstHeader = {"<|channel|>", " to=", kStart};

// Length of the longest tail of `text` that is a proper prefix of one of `tags`.
template <size_t N>
size_t partial_tag_tail(std::string_view text, const std::array<std::string_view, N>& tags) {
  size_t keep = 0;
  for (std::string_view tag : tags)
    for (size_t n = std::min(tag.size() - 1, text.size()); n > keep; --n)
      if (text.substr(text.size() - n) == tag.substr(0, n)) {
        keep = n;
        break;
      }
  return keep;
}


}  // namespace

std::pair<size_t, std::string_view> harmony_body_end(std::string_view text) {
  std::pair<size_t, std::string_view> first{std::string_view::npos, {}};
  for (std::string_view tag : kBodyEnds)
    if (const size_t at = text.find(tag); at < first.first) first = {at, tag};
  return first;
}

std::string_view harmony_header_field(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = header.substr(at + key.size());
  return rest.substr(0, rest.find_first_of(" <"));
}

void HarmonySplitter::open_message(std::string_view header) {
  constexpr std::string_view kFunctions = "functions.";
  const std::string_view recipient = harmony_header_field(header, "to=");
  call_name_.clear();
  call_body_.clear();
  message_wrote_ = false;
  if (recipient.empty()) {
    target_ = harmony_header_field(header, "<|channel|>") == "analysis" ? Target::Reasoning : Target::Content;
  } else if (tools_ && recipient.starts_with(kFunctions) && recipient.size() > kFunctions.size()) {
    target_ = Target::Call;
    call_name_ = recipient.substr(kFunctions.size());
  } else {
    target_ = Target::Reasoning;
  }
}

void HarmonySplitter::emit(std::string_view text, HarmonyText& out) {
  if (text.empty()) return;
  if (target_ == Target::Call) {
    call_body_.append(text);
    return;
  }
  const bool reasoning = target_ == Target::Reasoning;
  std::string& field = reasoning ? out.reasoning : out.content;
  bool& field_wrote = reasoning ? reasoning_wrote_ : content_wrote_;
  if (!message_wrote_) {
    if (field_wrote) field += "\n\n";
    field_wrote = message_wrote_ = true;
  }
  field.append(text);
}

void HarmonySplitter::end_message(HarmonyText& out) {
  if (target_ == Target::Call) {
    // ordered_json keeps the arguments in the order the model wrote them.
    const auto args = nlohmann::ordered_json::parse(call_body_, nullptr, /*allow_exceptions=*/false);
    if (args.is_object()) {
      out.calls.push_back({call_name_, args.dump()});
    } else {
      target_ = Target::Content;  // arguments that do not parse stay content, as Qwen's calls do
      emit(call_body_, out);
    }
  }
  target_ = Target::Content;
  call_body_.clear();
  message_wrote_ = false;
}

HarmonyText HarmonySplitter::push(std::string_view piece) {
  HarmonyText out;
  held_.append(piece);
  for (;;) {
    switch (state_) {
      case State::Start: {
        bool header = false, undecided = false;
        for (std::string_view start : kFirstHeader) {
          header |= held_.starts_with(start);
          undecided |= held_.size() < start.size() && start.starts_with(held_);
        }
        if (undecided) return out;
        state_ = header ? State::Header : State::Plain;
        continue;
      }
      case State::Plain:
        out.content += held_;
        held_.clear();
        return out;
      case State::Header: {
        const size_t end = held_.find(kMessage);
        if (end == std::string::npos) return out;
        open_message(std::string_view(held_).substr(0, end));
        held_.erase(0, end + kMessage.size());
        state_ = State::Body;
        continue;
      }
      case State::Body: {
        const auto [end, tag] = harmony_body_end(held_);
        if (end == std::string::npos) {
          const size_t keep = partial_tag_tail(held_, kBodyEnds);
          emit(std::string_view(held_).substr(0, held_.size() - keep), out);
          held_.erase(0, held_.size() - keep);
          return out;
        }
        emit(std::string_view(held_).substr(0, end), out);
        end_message(out);
        held_.erase(0, end + (tag == kStart ? 0 : tag.size()));
        state_ = State::Header;
        continue;
      }
    }
  }
}

HarmonyText HarmonySplitter::flush() {
  HarmonyText out;
  if (state_ == State::Start || state_ == State::Plain) {
    out.content = held_;
  } else if (state_ == State::Body) {
    emit(held_, out);
    end_message(out);
  }
  held_.clear();
  return out;
}

}  // namespace zinc::text
