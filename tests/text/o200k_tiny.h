// o200k-tiny (tests/data/text/o200k-tiny): gpt-oss's tokenizer in small, a 2000-token
// byte-level BPE with harmony's special tokens. Converted and loaded once per test
// program, for the tests of what a harmony reply's tokens do.
#pragma once

#include "text/tokenizer.h"

namespace zinc::test {

const text::Tokenizer& o200k_tiny();

}  // namespace zinc::test
