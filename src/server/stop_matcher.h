// Stop strings over streamed text. Text arrives in pieces (one token's worth at a
// time); a stop string may straddle pieces, so the tail that could still grow into
// one is held back until the next piece decides it. Once a stop string is found,
// the text before it is released and everything from it on is dropped: a stop
// string never reaches the client.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zinc::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Text safe to send after this piece (possibly empty). After a stop is found it
  // returns "" for every later piece.
  std::string push(std::string_view piece);
  // What is held back, at the end of generation (empty after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace zinc::server
