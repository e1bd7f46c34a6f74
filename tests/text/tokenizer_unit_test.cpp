// The tokenizer's rules on tiny hand-made vocabularies, where every expected id can
// be worked out by hand: merge order, added-token matching, byte fallback,
// sentencepiece scores vs merges, BOS/EOG metadata, NFC, streaming UTF-8.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "text/byte_level.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/unicode_nfc.h"

namespace zinc::text {
namespace {

struct Vocab {
  std::vector<uint8_t> bytes;  // the GGUF image the file parses in place
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

std::unique_ptr<Vocab> make_vocab(const std::function<void(gguf::GgufWriter&)>& fill) {
  gguf::GgufWriter w;
  fill(w);
  auto v = std::make_unique<Vocab>();
  v->bytes = w.write_memory([](size_t, uint8_t*) {});
  v->file = gguf::GgufFile::from_memory(v->bytes);
  v->tok = Tokenizer::from_gguf(*v->file);
  return v;
}

// Byte-level: ids 0..255 are the bytes, then merged tokens and added tokens.
enum : int32_t { kBC = 256, kAB, kAA, kSpecial, kSpecialBang, kUser, kImEnd };
std::unique_ptr<Vocab> byte_level_vocab() {
  return make_vocab([](gguf::GgufWriter& w) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
    for (const char* t : {"bc", "ab", "aa", "<|s|>", "<|s|>!", "<u>", "<|im_end|>"}) tokens.push_back(t);
    std::vector<int32_t> types(tokens.size(), 1);
    types[kSpecial] = types[kSpecialBang] = types[kImEnd] = 3;
    types[kUser] = 4;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {"b c", "a b", "a a"});
    w.set_u32("tokenizer.ggml.eos_token_id", kSpecial);
  });
}

using Ids = std::vector<int32_t>;

TEST(ByteLevelBpe, LowerRankMergesFirstAndTiesGoLeftToRight) {
  auto v = byte_level_vocab();
  EXPECT_EQ(v->tok->encode("abc"), (Ids{'a', kBC}));  // "b c" outranks "a b"
  EXPECT_EQ(v->tok->encode("ab"), (Ids{kAB}));
  EXPECT_EQ(v->tok->encode("aaa"), (Ids{kAA, 'a'}));
  EXPECT_EQ(v->tok->encode("aaaa"), (Ids{kAA, kAA}));
  EXPECT_EQ(v->tok->encode(""), Ids{});
  EXPECT_EQ(v->tok->decode(Ids{'a', kBC, ' ', kAA}), "abc aa");
}

TEST(ByteLevelBpe, AddedTokensAreLeftmostLongestAndSpecialsOptional) {
  auto v = byte_level_vocab();
  const Tokenizer& t = *v->tok;
  EXPECT_EQ(t.encode("x<|s|>!y"), (Ids{'x', kSpecialBang, 'y'}));
  EXPECT_EQ(t.encode("<|s|><u>"), (Ids{kSpecial, kUser}));
  // Without special parsing the control token is plain text; user-defined ones still match.
  EXPECT_EQ(t.encode("<|s|><u>", /*parse_special=*/false), (Ids{'<', '|', 's', '|', '>', kUser}));
  EXPECT_EQ(t.token_bytes(kSpecial), "<|s|>");
  EXPECT_EQ(t.decode(t.encode("q<|s|>ab<u>")), "q<|s|>ab<u>");
}

TEST(ByteLevelBpe, MetadataDefaults) {
  auto v = byte_level_vocab();
  const Tokenizer& t = *v->tok;
  EXPECT_EQ(t.bos(), -1);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.eos(), kSpecial);
  EXPECT_TRUE(t.is_eog(kSpecial));
  EXPECT_TRUE(t.is_eog(kImEnd));  // recognised by its text
  EXPECT_FALSE(t.is_eog(kUser));
  EXPECT_EQ(t.n_vocab(), kImEnd + 1);
  EXPECT_EQ(t.find_token("ab"), kAB);
  EXPECT_EQ(t.find_token("zz"), std::nullopt);
  EXPECT_THROW(t.token_bytes(t.n_vocab()), std::out_of_range);
  EXPECT_THROW(t.decode(Ids{-1}), std::out_of_range);
}

TEST(ByteLevelBpe, HarmonyEndsRepliesAtReturnOrCallNotEnd) {
  // gpt-oss: <|end|> closes the analysis message and the final one follows it.
  enum : int32_t { kEnd = 256, kReturn, kCall, kChannel };
  auto harmony = [](bool with_call) {
    return make_vocab([with_call](gguf::GgufWriter& w) {
      std::vector<std::string> tokens;
      for (int b = 0; b < 256; ++b) tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
      for (const char* t : {"<|end|>", "<|return|>", with_call ? "<|call|>" : "<|cal|>", "<|channel|>", "ab"})
        tokens.push_back(t);
      std::vector<int32_t> types(tokens.size(), 1);
      types[kEnd] = types[kReturn] = types[kCall] = types[kChannel] = 3;
      w.set_string("tokenizer.ggml.model", "gpt2");
      w.set_string("tokenizer.ggml.pre", "gpt-4o");
      w.set_string_array("tokenizer.ggml.tokens", tokens);
      w.set_i32_array("tokenizer.ggml.token_type", types);
      w.set_string_array("tokenizer.ggml.merges", {"a b"});
      w.set_u32("tokenizer.ggml.eos_token_id", kReturn);
    });
  };
  auto v = harmony(true);
  EXPECT_TRUE(v->tok->is_eog(kReturn));
  EXPECT_TRUE(v->tok->is_eog(kCall));
  EXPECT_FALSE(v->tok->is_eog(kEnd));
  EXPECT_FALSE(v->tok->is_eog(kChannel));
  // Without the harmony pair <|end|> keeps its usual meaning (Phi-3 and others).
  EXPECT_TRUE(harmony(false)->tok->is_eog(kEnd));
}

// SentencePiece style: <unk> <s> </s>, 256 byte tokens, then pieces.
constexpr int32_t kByte0 = 3, kSpace = 259, kA = 260, kB = 261, kSpaceA = 262, kABp = 263;
std::unique_ptr<Vocab> spm_vocab(bool with_merges) {
  return make_vocab([with_merges](gguf::GgufWriter& w) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
      types.push_back(6);
    }
    for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}) {
      tokens.push_back(t);
      types.push_back(1);
    }
    std::vector<float> scores(tokens.size(), 0.0f);
    scores[kSpaceA] = -1.0f;  // "▁a" scores better than "ab"
    scores[kABp] = -2.0f;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    if (with_merges) w.set_string_array("tokenizer.ggml.merges", {"a b", "\xE2\x96\x81 a"});
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  });
}

TEST(SentencePieceBpe, ScoresPickTheMergeAndSpacePrefixIsAdded) {
  auto v = spm_vocab(false);
  const Tokenizer& t = *v->tok;
  EXPECT_TRUE(t.add_space_prefix());
  EXPECT_TRUE(t.add_bos());  // the llama default
  EXPECT_EQ(t.encode("ab"), (Ids{1, kSpaceA, kB}));
  EXPECT_EQ(t.encode("ab", true, false), (Ids{kSpaceA, kB}));
  EXPECT_EQ(t.decode(t.encode("ab")), "<s>ab");  // the added space comes off again
  EXPECT_EQ(t.decode(t.encode("ab", true, false)), "ab");
  EXPECT_EQ(t.encode("a b", true, false), (Ids{kSpaceA, kSpace, kB}));
}

TEST(SentencePieceBpe, MergesOverrideScores) {
  auto v = spm_vocab(true);
  EXPECT_EQ(v->tok->encode("ab", true, false), (Ids{kSpace, kABp}));  // "a b" has rank 0
}

TEST(SentencePieceBpe, UnknownCharactersFallBackToBytes) {
  auto v = spm_vocab(false);
  const Tokenizer& t = *v->tok;
  EXPECT_EQ(t.encode("\xC3\xA9", true, false), (Ids{kSpace, kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9 b", true, false)), "a\xC3\xA9 b");
  EXPECT_EQ(t.token_bytes(kByte0 + 0x0A), "\n");
  EXPECT_EQ(t.token_bytes(kSpaceA), " a");
  EXPECT_TRUE(t.is_eog(2));
}

TEST(StreamDecoder, HoldsBackSplitCharactersUntilComplete) {
  auto v = spm_vocab(false);
  StreamDecoder s(*v->tok);
  EXPECT_EQ(s.push(kByte0 + 0xE2), "");
  EXPECT_EQ(s.push(kByte0 + 0x82), "");
  EXPECT_EQ(s.push(kByte0 + 0xAC), "\xE2\x82\xAC");  // €
  EXPECT_EQ(s.push(kByte0 + 0xF0), "");
  EXPECT_EQ(s.push(kByte0 + 0x9F), "");
  EXPECT_EQ(s.push(kByte0 + 0x98), "");
  EXPECT_EQ(s.push(kByte0 + 0x80), "\xF0\x9F\x98\x80");  // 😀 after 3 held bytes
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamDecoder, BytesNoTokenCanCompleteBecomeReplacementCharacters) {
  auto v = spm_vocab(false);
  StreamDecoder s(*v->tok);
  EXPECT_EQ(s.push(kByte0 + 0xE2), "");
  EXPECT_EQ(s.push(kA), "\xEF\xBF\xBD" "a");  // 'a' cannot continue U+2xxx
  EXPECT_EQ(s.push(kByte0 + 0x80), "\xEF\xBF\xBD");  // a stray continuation byte
  EXPECT_EQ(s.push(kByte0 + 0xC3), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
}

TEST(StreamDecoder, RandomByteStreamsOfMultiByteTextReassembleExactly) {
  // Every byte its own token: the hardest chunking there is.
  auto v = spm_vocab(false);
  const std::vector<std::string> alphabet = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xED\x9F\xBF",
                                             "\xEF\xBF\xBD", "\xF4\x8F\xBF\xBF", "\xE0\xA4\xA8"};
  std::mt19937 rng(3);
  for (int round = 0; round < 500; ++round) {
    std::string text;
    for (int i = 0, n = 1 + rng() % 20; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    StreamDecoder s(*v->tok);
    std::string out;
    for (unsigned char byte : text) {
      std::string piece = s.push(kByte0 + byte);
      size_t held = 0;
      EXPECT_EQ(utf8_complete_prefix(piece, held), piece) << "push returned invalid UTF-8";
      out += piece;
    }
    EXPECT_EQ(out + s.flush(), text);
  }
}

TEST(Nfc, ComposesReordersAndLeavesExclusions) {
  EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");                              // e + U+0301 -> é
  EXPECT_EQ(nfc_normalize("a\xCC\x81\xCC\xA3"), "\xE1\xBA\xA1\xCC\x81");          // below-dot sorts first, composes
  EXPECT_EQ(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // conjoining jamo -> 각
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");                           // Angstrom sign -> Å
  EXPECT_EQ(nfc_normalize("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");           // U+0958 is excluded
  EXPECT_EQ(nfc_normalize("\xCC\x81x"), "\xCC\x81x");                              // a leading mark stays
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("\xFF" "e\xCC\x81\xC3"), "\xFF\xC3\xA9\xC3");            // invalid bytes pass through
}

TEST(TokenizerLoad, RejectsUnknownModels) {
  EXPECT_THROW(make_vocab([](gguf::GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "bert");
                 w.set_string_array("tokenizer.ggml.tokens", {"a"});
               }),
               std::runtime_error);
  EXPECT_THROW(make_vocab([](gguf::GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "gpt2");
                 w.set_string("tokenizer.ggml.pre", "no-such-pre");
                 w.set_string_array("tokenizer.ggml.tokens", {"a"});
               }),
               std::runtime_error);
}

}  // namespace
}  // namespace zinc::text
