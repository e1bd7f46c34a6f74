"""Whether a text is a JSON value, or could still become one: what a reply held to a
JSON grammar is when max_tokens cuts it off."""
import re

_NUMBER_PREFIX = re.compile(r"-?(0|[1-9][0-9]*)?(\.[0-9]*)?([eE][+-]?[0-9]*)?")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_HEX = set("0123456789abcdefABCDEF")


class _Incomplete(Exception):
    """The text ended where the value could still go on."""


class _Invalid(Exception):
    """No continuation makes the text a JSON value."""


class _Parser:
    def __init__(self, text):
        self.s, self.i = text, 0

    def peek(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1
        if self.i == len(self.s):
            raise _Incomplete
        return self.s[self.i]

    def expect(self, c):
        if self.peek() != c:
            raise _Invalid
        self.i += 1

    def value(self):
        c = self.peek()
        if c == "{":
            return self.container("}", lambda: (self.string(), self.expect(":"), self.value()))
        if c == "[":
            return self.container("]", self.value)
        if c == '"':
            return self.string()
        for literal in ("true", "false", "null"):
            if literal.startswith(self.s[self.i:self.i + len(literal)]) and self.s[self.i] == literal[0]:
                if len(self.s) - self.i < len(literal):
                    raise _Incomplete
                self.i += len(literal)
                return
        m = re.compile(r"[-+0-9.eE]*").match(self.s, self.i)
        run = m.group(0)
        if m.end() == len(self.s) and _NUMBER_PREFIX.fullmatch(run):
            raise _Incomplete
        if not run or not _NUMBER.fullmatch(run):
            raise _Invalid
        self.i = m.end()

    def container(self, close, item):
        self.i += 1
        if self.peek() == close:
            self.i += 1
            return
        while True:
            if close == "}" and self.peek() != '"':
                raise _Invalid
            item()
            c = self.peek()
            self.i += 1
            if c == close:
                return
            if c != ",":
                raise _Invalid

    def string(self):
        self.expect('"')
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return
            if ord(c) < 0x20:
                raise _Invalid
            if c == "\\":
                esc = self.s[self.i + 1:self.i + 2]
                if not esc:
                    raise _Incomplete
                if esc == "u":
                    digits = self.s[self.i + 2:self.i + 6]
                    if any(d not in _HEX for d in digits):
                        raise _Invalid
                    if len(digits) < 4:
                        raise _Incomplete
                    self.i += 6
                    continue
                if esc not in '"\\/bfnrt':
                    raise _Invalid
                self.i += 2
                continue
            self.i += 1
        raise _Incomplete


def is_json_prefix(text):
    """True when `text` is a JSON value (trailing whitespace allowed) or a prefix of one."""
    p = _Parser(text)
    try:
        p.value()
    except _Incomplete:
        return True
    except _Invalid:
        return False
    return text[p.i:].strip() == ""
