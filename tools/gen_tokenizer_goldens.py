#!/usr/bin/env python3
"""Writes tests/data/text/tokenizer_goldens.json: a multilingual corpus and what
Hugging Face `tokenizers` makes of it, for zinc's tokenizer tests to compare with.

  - token ids of every corpus string for the real Qwen3 and Gemma3 tokenizers
    (no BOS; special-token text parsed, and again not parsed where it occurs),
  - the decoded text where it differs from the input (Qwen3 NFC-normalizes),
  - the same for a tiny o200k-style tokenizer trained here on the corpus (gpt-oss's
    pre-tokenizer and harmony special tokens; written to tests/data/text/o200k-tiny/),
    since no real gpt-oss tokenizer.json is at hand,
  - the pieces of each named byte-level pre-tokenizer on strings where they differ,
    and those of gpt-4o (o200k, gpt-oss) on the whole corpus as well; the gpt-4o
    pieces are checked against a second regex engine (the `regex` module) first.

Usage: pip install tokenizers regex; python3 tools/gen_tokenizer_goldens.py
       [--shared ../shared/testdata/tokenizers] [--out tests/data/text/tokenizer_goldens.json]
"""
import argparse
import json
import lzma
import os
import random
import unicodedata

import regex
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# tiktoken's o200k_base pat_str; the Split regex of gpt-oss's tokenizer.json.
O200K_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split_then_bytes(pattern):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


PRE_TOKENIZERS = {
    "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "llama-bpe": split_then_bytes(LLAMA3_REGEX),
    "qwen2": split_then_bytes(QWEN2_REGEX),
    "qwen35": split_then_bytes(QWEN35_REGEX),
    "gpt-4o": split_then_bytes(O200K_REGEX),
    "smollm": pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]),
}

# Strings on which the pre-tokenizers above disagree (digits, contractions, marks, newlines).
PRE_TOKENIZER_STRINGS = [
    "I'm sure you'll say it's 12345 dollars",
    "I'M SURE YOU'LL SAY IT'S", "don't  stop\n\n  now",
    "x = 1000000 + 22;\n\treturn x;",
    "नमस्ते दुनिया", "ก่อน", "e\u0301te\u0301 cafe\u0301",
    "hello\r\n\r\nworld  ", "   leading and trailing   ", "a\u00a0b\u3000c",
    "3.14159 and 2,718", "foo!!!bar???\n", "ab12cd345ef6789", "'s 's 'S",
    # o200k's case-aware words, suffix contractions and punctuation runs.
    "HelloWorld XMLHttpRequest iPhone McDonald's HTTPServer ABCdef", "camelCaseName snake_case_name SHOUT",
    "DON'T won't THEY'RE We'Ve i'D O'Neil's x'LL", "'tis 'Twas rock'n'roll", "it\u2019s don\u2019t",
    "\u01c5ungla \u01c8ubljana \u01cbeva", "\u02b0aspirated \u02bcokina Hawai\u02bbi", "'\u017ftart it'\u017f IT'\u017f stra\u017fe 's",
    "\u00c9COLE \u00e9cole \u00c9cole E\u0301COLE \u0394\u03b9\u03b1\u03c6\u03ac\u03bd\u03b5\u03b9\u03b1",
    "1234567 12 1 0.5 \u0661\u0662\u0663\u0664 \u00bd\u2167\u2168 \u2460\u2461",
    "path/to/file.txt ./run.sh a//b ?/\n/x \\ //\n\n// .//", "... --- !!! ?!?! ...\n\n\n next",
    "\u4f60\u597d\u4e16\u754cHello\u4e16\u754c 123\u5e74 \u3053\u3093\u306b\u3061\u306fWorld",
    "\U0001F600\U0001F600 a\U0001F389b \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F44D\U0001F3FDok",
    "line1\nline2\r\n\r\nline3\n   \n\tx", "  \n  end \t\t", "\u0301start \u0300\u0301 mark", "\u00a0\u00a0x \u2003y",
]

ENGLISH = [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged that a single man in possession of a good fortune must be in want of a wife.",
    "I can't believe they'd've done that; you're kidding, aren't you?", "Mr. O'Neil's dog isn't here.",
    "HELLO WORLD, THIS IS LOUD.", "e.g. i.e. etc. vs. Dr. Smith", "hyphen-ated words and em—dashes – and en dashes",
    "“Curly quotes” and ‘single ones’ … ellipsis", "Tab\tseparated\tvalues\there", "line one\nline two\nline three",
    "Windows\r\nline\r\nendings", "trailing space ", " leading space", "  two leading", "multiple     spaces   inside",
    "a", "A", "I", "?", "!", ".", "...", "a b c d e f g", "UPPER lower MiXeD CaSe",
]
CODE = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "const x = async () => { await fetch('/api/v1/users?id=7&sort=desc'); };",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "    indented four\n\tindented tab\n        indented eight",
    "if x != y and not (a <= b or c >= d):\n        pass", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "<div class=\"container\"><p>Hello &amp; welcome</p></div>", "$ ls -la /usr/local/bin | grep -v '^d' > out.txt 2>&1",
    "x+=1;y-=2;z*=3;w/=4;v%=5;u**=6", "a->b; c::d; e<<f; g>>h; i&&j; k||l", "// comment\n/* block */\n# hash",
    "\"\"\"docstring\"\"\"", "lambda x: x**2 + 2*x + 1", "std::vector<std::pair<int, std::string>> v{{1, \"a\"}};",
    "git commit -m \"fix: handle UTF-8 in tokenizer\"", "https://example.com/path/to/page.html?q=hello+world#top",
    "user@example.com", "C:\\Users\\name\\Documents\\file.txt",
]
JSON_STRINGS = [
    '{"name": "zinc", "version": 1, "tags": ["llm", "gguf"], "nested": {"a": null, "b": true}}',
    '[1, 2.5, -3e10, "four", {"five": [6]}]', '{"emoji": "😀", "cjk": "中文", "escaped": "\\u00e9\\n"}',
    '{\n  "indented": {\n    "deeply": [\n      1,\n      2\n    ]\n  }\n}', '{}', '[]', '""', '{"a":{"b":{"c":{"d":1}}}}',
]
CJK = [
    "你好，世界！", "我们今天去公园散步，天气非常好。", "機械学習は人工知能の一分野です。", "こんにちは、元気ですか？",
    "カタカナとひらがなと漢字を混ぜた文章", "東京タワーの高さは333メートルです。", "中文English混合text测试",
    "「引用符」と『二重引用符』", "全角スペース　を含む", "一二三四五六七八九十", "𠀀𠀁𠀂 rare CJK extension B",
]
KOREAN = ["안녕하세요, 세계!", "한국어 형태소 분석은 어렵습니다.", "서울특별시 강남구 테헤란로 123", "ㅋㅋㅋㅋ ㅎㅎ"]
ARABIC = ["مرحبا بالعالم", "اللغة العربية جميلة جداً", "عدد ١٢٣٤٥٦٧٨٩٠", "שלום עולם", "mixed עברית and English"]
DEVANAGARI = ["नमस्ते दुनिया", "हिन्दी भाषा में लिखा गया वाक्य।", "क्षत्रिय ज्ञान श्री", "संस्कृतम् ॐ"]
CYRILLIC = ["Привет, мир!", "Съешь же ещё этих мягких французских булок, да выпей чаю.", "Ёлка и ежик", "Україна, Київ"]
OTHER_SCRIPTS = [
    "Γειά σου Κόσμε", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "Tiếng Việt có dấu: Việt Nam, người, được",
    "ქართული ენა", "Հայերեն", "አማርኛ", "தமிழ் மொழி", "বাংলা ভাষা", "ᠮᠣᠩᠭᠣᠯ", "Zürich Straße Ærø Øresund façade naïve",
]
EMOJI = [
    "😀😃😄😁", "👍🏽 thumbs up with skin tone", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 rainbow flag", "🇺🇸🇯🇵🇩🇪🇫🇷 flags",
    "👩🏿‍💻 technologist", "❤️ heart with VS16", "🧑‍🤝‍🧑", "1️⃣ 2️⃣ #️⃣ keycaps", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland tag sequence",
    "emoji at end 🎉", "🎉 emoji at start", "a😀b😀c", "🤷‍♂️🤦‍♀️",
]
COMBINING = [
    "e\u0301", "cafe\u0301 re\u0301sume\u0301", "n\u0303", "a\u0308o\u0308u\u0308", "Z\u0351\u0363\u036b\u0369a\u0352lgo",
    "q\u0307\u0323", "\u0301 leading combining mark", "o\u0328\u0304", "Ångström (decomposed A\u030angstro\u0308m)",
    "\u1100\u1161\u11a8 conjoining jamo", "x\u20dd enclosing circle", "a\u0300\u0301\u0302\u0303 stacked",
]
WHITESPACE = [
    "", " ", "  ", "\t", "\n", "\n\n", "\n\n\n\n", "\r\n", " \n ", "\u00a0nbsp\u00a0here", "zero\u200bwidth\u200bspace",
    "zwnj\u200cand\u200dzwj", "\ufeffBOM at start", "thin\u2009space and hair\u200aspace", "ideographic\u3000space",
    "line\u2028separator", "para\u2029separator", "vertical\x0btab and form\x0cfeed", "NEL\x85char", "mixed \t\n \r\n\t end",
    "   ", "word\n", "\nword", "    \n    \n", "tab\t\t\ttabs", "\u200b", "\u00a0", "\u2003em space\u2003",
]
DIGITS = [
    "0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159265358979", "1,000,000", "-273.15",
    "2024-01-01T12:34:56Z", "0x1F 0b1010 0o777", "v1.2.3", "phone 555-0123", "٣٤٥ Arabic-Indic", "१२३ Devanagari digits",
    "１２３ fullwidth", "½ ¾ ² ³ Ⅷ", "9" * 40, "1e-9 6.02e23",
]
LONG = [
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "Supercalifragilisticexpialidocious" * 8, "a" * 300, "ab" * 150, "😀" * 40, "中" * 120,
    "x" + "y" * 250 + "z", "-" * 80, "=" * 64 + "\n" + "#" * 64, "The end. " * 30,
]
SPECIAL = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "text<|im_end|>more",
    "<think>\n\n</think>\n\n", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos>hello<eos>",
    "<|im_start|><|im_start|>", "not <|a special|> token", "<pad><unk><mask>", "<tool_call>{\"a\":1}</tool_call>",
    "<start_of_image>", "almost <|im_end| special", "<|im_end|>\n<|im_start|>", "<end_of_turn><eos>",
]
# OpenAI harmony (gpt-oss) turns; appended after the random mixtures so those stay put.
HARMONY = [
    "<|start|>user<|message|>Hi<|end|><|start|>assistant",
    "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Z\u00fcrich\"}<|call|>",
    "<|channel|><|message|><|constrain|>json<|startoftext|><|endoftext|>", "almost <|end| and <|start |>",
]
# gpt-oss's special tokens (tokenizer_config.json), appended to the tiny vocabulary.
HARMONY_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                    "<|end|>", "<|message|>", "<|call|>"]


def corpus():
    strings = (ENGLISH + CODE + JSON_STRINGS + CJK + KOREAN + ARABIC + DEVANAGARI + CYRILLIC + OTHER_SCRIPTS +
               EMOJI + COMBINING + WHITESPACE + DIGITS + LONG + SPECIAL)
    # Random mixtures of the pieces above, to reach corners no one thought of.
    rng = random.Random(1234)
    pool = [s for s in strings if s]
    for _ in range(60):
        k = rng.randint(2, 5)
        strings.append(rng.choice(["", " ", "\n"]).join(rng.choice(pool)[:rng.randint(1, 40)] for _ in range(k)))
    strings += HARMONY
    # SentencePiece maps U+2581 to a space on decode, so it cannot round-trip: keep it out.
    assert not any("\u2581" in s for s in strings)
    return strings


def load_tokenizer(shared, name):
    with lzma.open(os.path.join(shared, name, "tokenizer.json.xz"), "rt", encoding="utf-8") as f:
        return Tokenizer.from_str(f.read())


def write_o200k_tiny(strings, out_dir):
    """A 2000-token byte-level BPE trained on the corpus with gpt-oss's pre-tokenizer
    (Split by the o200k regex, then ByteLevel without its own regex) and decoder, plus
    harmony's special tokens; written the way Hugging Face stores a tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = PRE_TOKENIZERS["gpt-4o"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(strings, trainer)
    tok.add_special_tokens(HARMONY_SPECIALS)
    os.makedirs(out_dir, exist_ok=True)
    config = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"}
    for name, text in (("tokenizer.json", tok.to_str()), ("tokenizer_config.json", json.dumps(config, indent=2))):
        with lzma.open(os.path.join(out_dir, name + ".xz"), "wt", encoding="utf-8") as f:
            f.write(text)
    return Tokenizer.from_str(tok.to_str())


def model_goldens(tok, strings):
    ids, ids_no_special, decoded = [], {}, {}
    for i, s in enumerate(strings):
        tok.encode_special_tokens = False
        enc = tok.encode(s, add_special_tokens=False).ids
        ids.append(enc)
        text = tok.decode(enc, skip_special_tokens=False)
        if text != s:
            decoded[str(i)] = text
        if "<" in s:
            tok.encode_special_tokens = True
            ids_no_special[str(i)] = tok.encode(s, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return {"ids": ids, "ids_no_special": ids_no_special, "decoded": decoded}


def o200k_pieces(text):
    """gpt-4o pieces (byte-level spelling) from HF tokenizers, asserted equal to a
    split by the `regex` module (a different engine than tokenizers' Oniguruma)."""
    pieces = [p for p, _ in PRE_TOKENIZERS["gpt-4o"].pre_tokenize_str(text)]
    raw, end = [], 0
    for m in regex.finditer(O200K_REGEX, text):
        if m.start() > end:
            raw.append(text[end:m.start()])
        raw.append(m.group())
        end = m.end()
    if end < len(text):
        raw.append(text[end:])
    bytes_only = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    assert pieces == [bytes_only.pre_tokenize_str(r)[0][0] for r in raw], (text, pieces, raw)
    return pieces


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "shared", "testdata", "tokenizers"))
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "data", "text", "tokenizer_goldens.json"))
    args = parser.parse_args()
    strings = corpus()
    out = {"corpus": strings}
    for name in ("qwen3", "gemma3"):
        out[name] = model_goldens(load_tokenizer(args.shared, name), strings)
        changed = out[name]["decoded"]
        for i, text in changed.items():  # only normalization may change text
            assert text == unicodedata.normalize("NFC", strings[int(i)]), (name, strings[int(i)], text)
    tiny = write_o200k_tiny(strings, os.path.join(REPO, "tests", "data", "text", "o200k-tiny"))
    out["o200k-tiny"] = model_goldens(tiny, strings)
    assert not out["o200k-tiny"]["decoded"]  # no normalizer: every string round-trips
    o200k_corpus = [o200k_pieces(s) for s in strings]
    out["pretokenizers"] = {
        "strings": PRE_TOKENIZER_STRINGS,
        "pieces": {name: [o200k_pieces(s) if name == "gpt-4o" else [p for p, _ in pt.pre_tokenize_str(s)]
                          for s in PRE_TOKENIZER_STRINGS]
                   for name, pt in PRE_TOKENIZERS.items()},
        "corpus_pieces": {"gpt-4o": o200k_corpus},
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{args.out}: {len(strings)} strings")


if __name__ == "__main__":
    main()
