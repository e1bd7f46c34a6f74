"""json_prefix.is_json_prefix, which the JSON-grammar tests rely on, against JSON's rules."""
import json

from json_prefix import is_json_prefix

VALID = ['{"a": [1, -2.5e3, true, null, "x\\u00e9\\n"], "b": {}}', "[]", '"s"', "0", "-0.1E+2", "false"]


def test_every_prefix_of_a_value_is_a_prefix():
    for text in VALID:
        json.loads(text)
        for end in range(len(text) + 1):
            assert is_json_prefix(text[:end]), text[:end]


def test_texts_no_continuation_can_fix():
    for text in ['{"a" 1', "{1:", '{"a": tru e', "[1,]", '"\\x"', '"\\u12g', "01", "[1 2", '{"a": 1}}', "nul!",
                 '"a\nb"', "{,", "--1", "1.e5x"]:
        assert not is_json_prefix(text), text
