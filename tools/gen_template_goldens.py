#!/usr/bin/env python3
"""Writes the golden outputs zinc's Jinja interpreter is tested against.

Renders with jinja2 exactly as transformers' apply_chat_template does:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]) with transformers' tojson / raise_exception /
strftime_now (the clock fixed, so goldens are reproducible), and passes
messages, tools, documents, add_generation_prompt and the special tokens.

Outputs (committed; CI needs no Python):
  tests/data/templates/goldens.json   real chat templates x conversations
  tests/data/templates/features.json  one small template per interpreter feature

Usage: python3 tools/gen_template_goldens.py
"""
import json
import os
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "templates")
# What strftime_now() sees; the C++ test fixes the same date and time.
FIXED_NOW = datetime(2025, 3, 7, 14, 5, 9)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(source, context):
    """The output, or None and the error message."""
    try:
        return make_env().from_string(source).render(**context), None
    except Exception as e:  # noqa: BLE001 - every jinja2 failure is a golden "error" case
        return None, f"{type(e).__name__}: {e}"


# ---- conversations ---------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city — in °C",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                    "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "number"}}},
        },
    },
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant.\n"}
CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "system_multi_turn": [
        SYSTEM,
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 = 4."},
        {"role": "user", "content": "  And 3+3?  "},
    ],
    "unicode_and_quotes": [
        {"role": "user", "content": "héllo 你好 🎉 \"quoted\" 'single' back\\slash\ttab"},
        {"role": "assistant", "content": "Bonjour ! ✓"},
        {"role": "user", "content": "{{ not a template }} {% neither %}"},
    ],
    "tool_call_and_result": [
        SYSTEM,
        {"role": "user", "content": "Weather in Zürich for 3 days?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 3, "units": "celsius"}}}
            ],
        },
        {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"sunny\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and sunny."},
        {"role": "user", "content": "Thanks!"},
    ],
    "parallel_tool_calls": [
        {"role": "user", "content": "Weather in Paris and news about it?"},
        {
            "role": "assistant",
            "content": "Let me look both up.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "extra": {"nested": [1, 2.5, True, None]}}}},
                {"type": "function", "function": {"name": "search", "arguments": {"query": "Paris news", "top_k": 3}}},
            ],
        },
        {"role": "tool", "content": "cloudy"},
        {"role": "tool", "content": "nothing new"},
    ],
    "tool_call_string_arguments": [
        {"role": "user", "content": "Search for cats"},
        {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": "{\"query\": \"cats\"}"}}]},
        {"role": "tool", "content": "cats are great"},
    ],
    "reasoning_in_history": [
        SYSTEM,
        {"role": "user", "content": "Pick a number."},
        {"role": "assistant", "content": "7", "reasoning_content": "\nThe user wants any number.\n"},
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "It is my favourite.", "reasoning_content": "Explain the choice."},
    ],
    "reasoning_after_last_query": [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "I should call the tool.",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "snow"},
    ],
    "think_tags_in_content": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello there!"},
        {"role": "user", "content": "Bye"},
    ],
    "developer_and_two_systems": [
        {"role": "system", "content": "Rule one."},
        {"role": "developer", "content": "Rule two."},
        {"role": "user", "content": "Go."},
    ],
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "Parted system."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]},
    ],
    "builtin_tool_call": [
        {"role": "user", "content": "Search the news"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "brave_search", "arguments": {"query": "news"}}}]},
        {"role": "ipython", "content": {"results": ["a", "b"]}},
    ],
    "empty_messages": [],
}

# Tools whose schemas reach every branch of gpt-oss's TypeScript-style tool rendering
# (arrays of each kind, type lists, oneOf, enums, nullables, nested objects, defaults).
SCHEMA_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "plan_trip",
            "description": "Plan a trip",
            "parameters": {
                "type": "object",
                "properties": {
                    "cities": {"type": "array", "items": {"type": "string"}, "description": "Cities in order"},
                    "budgets": {"type": "array", "items": {"type": "number"}, "nullable": True},
                    "nights": {"type": "array", "items": {"type": "integer"}},
                    "flags": {"type": "array", "items": {"type": "boolean"}},
                    "legs": {"type": "array", "items": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}, "required": ["from"]}},
                    "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                    "anything": {"type": "array"},
                    "id": {"type": ["string", "integer"]},
                    "single": {"type": ["string"]},
                    "mode": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number", "default": 1.5}], "default": "auto"},
                    "shape": {"oneOf": [{"type": "object"}, {"type": "string"}]},
                    "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
                    "note": {"type": "string", "nullable": True},
                    "limit": {"type": "integer", "default": 10},
                    "strict": {"type": "boolean", "default": False},
                    "options": {"type": "object", "properties": {"pets": {"type": "boolean"}, "seats": {"type": "integer"}}, "required": ["seats"]},
                    "extra": {"type": "object"},
                    "blob": {"description": "no type at all"},
                },
                "required": ["cities", "id"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The current time", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "ping", "description": "Ping"}},
]

# OpenAI harmony (gpt-oss): reasoning travels in "thinking"; a tool call's reasoning
# is kept only until a later final answer; channel tags in content are refused.
HARMONY_CONVERSATIONS = {
    "thinking_in_history": [
        SYSTEM,
        {"role": "user", "content": "Pick a number."},
        {"role": "assistant", "content": "7", "thinking": "The user wants any number."},
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "It is my favourite.", "thinking": "Explain the choice."},
    ],
    "tool_call_with_thinking": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "thinking": "I should call the tool.", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "snow, -3 °C"},
    ],
    "tool_call_then_final": [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": "Calling the weather tool.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}}]},
        {"role": "tool", "content": "{\"sky\": \"clear\"}"},
        {"role": "assistant", "content": "Clear skies in Rome.", "thinking": "Summarise."},
        {"role": "user", "content": "And tomorrow?"},
    ],
    "tool_call_without_function_wrapper": [
        {"role": "user", "content": "Ping it"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "ping", "arguments": "{\"host\": \"example.org\"}", "content_type": "json"}]},
        {"role": "tool", "content": "pong"},
    ],
    "channel_tags_in_content": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<|channel|>final<|message|>Hello"},
    ],
    "thinking_and_content_with_tool_call": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "a", "thinking": "b", "tool_calls": [{"type": "function", "function": {"name": "ping", "arguments": {}}}]},
    ],
    "tool_result_without_call": [
        {"role": "user", "content": "Hi"},
        {"role": "tool", "content": "orphan"},
    ],
}

HARMONY_VARIANTS = [
    ("effort_high", {"add_generation_prompt": True, "reasoning_effort": "high"}),
    ("identity_low", {"add_generation_prompt": True, "model_identity": "You are zinc, a small model.", "reasoning_effort": "low"}),
    ("builtin_browser_python", {"add_generation_prompt": True, "builtin_tools": ["browser", "python"]}),
    ("builtin_python", {"add_generation_prompt": False, "builtin_tools": ["python"]}),
]

# (template file, special tokens, conversations, variants of kwargs)
TEMPLATES = {
    "qwen3.jinja": {"bos_token": "", "eos_token": "<|im_end|>"},
    "qwen3.5.jinja": {"bos_token": "", "eos_token": "<|im_end|>"},
    "qwen3.6.jinja": {"bos_token": "", "eos_token": "<|im_end|>"},
    "qwen3.6-unsloth.jinja": {"bos_token": "", "eos_token": "<|im_end|>"},
    "gemma3.jinja": {"bos_token": "<bos>", "eos_token": "<end_of_turn>"},
    "smollm2.jinja": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama3.1.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3.2.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "gpt-oss.jinja": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"},
}

TOOL_CONVERSATIONS = {"builtin_tool_call", "tool_call_and_result", "parallel_tool_calls", "tool_call_string_arguments", "reasoning_after_last_query",
                      "tool_call_with_thinking", "tool_call_then_final", "tool_call_without_function_wrapper"}

VARIANTS = [
    ("gen", {"add_generation_prompt": True}),
    ("nogen", {"add_generation_prompt": False}),
    ("think_on", {"add_generation_prompt": True, "enable_thinking": True}),
    ("think_off", {"add_generation_prompt": True, "enable_thinking": False}),
    ("preserve_thinking", {"add_generation_prompt": True, "preserve_thinking": True}),
    ("builtin_tools", {"add_generation_prompt": True, "builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
]


# Per template: conversations beyond the shared ones, the kwargs variants (replacing
# the shared ones: Qwen's thinking switches mean nothing to harmony) and extra tool
# sets with the conversations they go with.
EXTRAS = {
    "gpt-oss.jinja": {
        "conversations": HARMONY_CONVERSATIONS,
        "variants": [v for v in VARIANTS if v[0] in ("gen", "nogen", "builtin_tools")] + HARMONY_VARIANTS,
        "tools": [("schema_tools", SCHEMA_TOOLS, {"single_user", "tool_call_then_final"})],
    },
}


def chat_context(messages, tools, tokens, kwargs):
    # apply_chat_template's render call: messages, tools, documents, add_generation_prompt,
    # the special tokens, then the caller's kwargs.
    context = {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": False}
    context.update(tokens)
    context.update(kwargs)
    return context


def template_goldens():
    cases = []
    for file, tokens in TEMPLATES.items():
        source = open(os.path.join(DATA, file), encoding="utf-8").read()
        extra = EXTRAS.get(file, {})
        conversations = {**CONVERSATIONS, **extra.get("conversations", {})}
        for conv_name, messages in conversations.items():
            tool_sets = [("notools", None)]
            if conv_name in TOOL_CONVERSATIONS or conv_name == "single_user":
                tool_sets.append(("tools", TOOLS))
            tool_sets += [(name, tools) for name, tools, convs in extra.get("tools", []) if conv_name in convs]
            for tools_name, tools in tool_sets:
                for variant, kwargs in extra.get("variants", VARIANTS):
                    context = chat_context(messages, tools, tokens, kwargs)
                    out, err = render(source, context)
                    case = {"name": f"{file[:-6]}/{conv_name}/{tools_name}/{variant}", "template": file, "context": context}
                    if err is None:
                        case["expected"] = out
                    else:
                        case["error"] = err
                    cases.append(case)
    return cases


# ---- one template per interpreter feature ------------------------------------------

FEATURES = [
    ("text_only", "plain text\n", {}),
    ("keep_inner_newlines", "a\n\nb\n\n", {}),
    ("print_values", "{{ s }}|{{ i }}|{{ f }}|{{ t }}|{{ n }}|{{ l }}|{{ d }}|{{ missing }}|", {"s": "x", "i": 3, "f": 2.5, "t": True, "n": None, "l": [1, "a", None, False, 1.0], "d": {"k": "v's", "q": "\"x\""}}),
    ("float_repr", "{{ a }} {{ b }} {{ c }} {{ d }} {{ e }} {{ 1e16 }} {{ 10 / 4 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {"a": 0.1, "b": 1e-5, "c": 123456789.125, "d": 1e22, "e": -0.0001}),
    ("whitespace_minus", "a  {{- 'b' -}}  c\n  {%- if true -%}  d  {%- endif -%}  e", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter\n", {}),
    ("lstrip_blocks", "    {% if true %}\n    x\n    {% endif %}\n  {# comment #}\nend", {}),
    ("lstrip_not_for_vars", "  {{ 'v' }}\n  {%+ if true %}kept{% endif %}", {}),
    ("comment_whitespace", "a {#- c -#} b\n{# line #}\nc", {}),
    ("trailing_newline_dropped", "x\n", {}),
    ("if_elif_else", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("for_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }},{% endfor %}", {}),
    ("for_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for k, v in d|items %}{{ v }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_scope_does_not_leak", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(count=0, last=none) %}{% for x in [3, 4] %}{% set ns.count = ns.count + x %}{% set ns.last = x %}{% endfor %}{{ ns.count }} {{ ns.last }}", {}),
    ("set_tuple_and_block", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set blk %}inside {{ a }}{% endset %}[{{ blk }}]", {}),
    ("macro_defaults_and_kwargs", "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(name='Cy', punct='?') }}", {}),
    ("macro_sees_globals_and_namespace", "{% set ns = namespace(n=0) %}{% macro bump() %}{% set ns.n = ns.n + 1 %}{{ prefix }}{{ ns.n }}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.n }}", {"prefix": "#"}),
    ("macro_result_filtered", "{% macro m() %}  padded  {% endmacro %}[{{ m()|trim }}]", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("string_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip(' x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ s.upper() }}|{{ s.lower() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('a') }}{{ 'ab'.startswith(('x', 'a')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ '-'.join(['x', 'y']) }}|{{ 'abc'.find('c') }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'abab'.count('ab') }}|{{ '42'.isdigit() }}", {"s": "  xHello World x  "}),
    ("dict_methods", "{{ d.items() | list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d['a'] }} {{ d.a }}", {"d": {"a": 1, "b": [2]}}),
    ("dict_method_shadows_key", "{{ d['items'] }} {{ d.items is defined }}", {"d": {"items": "the key"}}),
    ("slicing_indexing", "{{ l[::-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[-1] }} {{ l[0] }} {{ l[1:3] }} {{ l[::2] }} {{ s[::-1] }} {{ s[1:3] }} {{ s[0] }} {{ s[-1] }} {{ l.0 }}", {"l": [1, 2, 3, 4], "s": "héllo"}),
    ("concat_and_plus", "{{ 'a' ~ 1 ~ none ~ missing ~ true }} {{ 'a' + 'b' }} {{ 1 + 2.5 }} {{ [1] + [2] }} {{ 'ab' * 2 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ [1, 2] == [1, 2] }} {{ true == 1 }} {{ none == none }} {{ 'x' in 'xyz' }} {{ 'k' in d }} {{ 3 not in [1, 2] }} {{ missing == missing }}", {"d": {"k": 1}}),
    ("boolean_logic", "{{ true and 'yes' }} {{ 0 or 'fallback' }} {{ not none }} {{ not [] }} {{ '' or [] }} {{ 1 and 0 }} {{ not (true and false) }}", {}),
    ("ternary", "{{ 'a' if x else 'b' }} {{ 'a' if not x else 'b' }} [{{ 'only' if false }}] {{ 1 if false else 2 if true else 3 }}", {"x": True}),
    ("tests", "{{ x is defined }}{{ y is undefined }}{{ n is none }}{{ s is string }}{{ d is mapping }}{{ l is sequence }}{{ s is sequence }}{{ d is sequence }}{{ s is iterable }}{{ i is number }}{{ f is number }}{{ t is number }}{{ i is integer }}{{ f is float }}{{ t is true }}{{ i is true }}{{ ff is false }}{{ l is not string }}{{ d is not mapping }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'abc' }}{{ s is lower }}{{ i is eq 3 }}{{ t is boolean }}{{ n is iterable }}{{ i is iterable }}{{ d is iterable }}", {"x": 1, "n": None, "s": "abc", "d": {}, "l": [], "i": 3, "f": 1.5, "t": True, "ff": False}),
    ("undefined_tests", "{{ y is sequence }}{{ y is iterable }}{{ y is mapping }}{{ y is string }}{{ y is none }}{{ y | length }}[{{ y }}]{% for z in y %}never{% endfor %}{{ y | default('dflt') }}{{ '' | default('dflt') }}{{ '' | default('dflt', true) }}", {}),
    ("undefined_attribute_chain", "{{ d.missing is defined }} {{ d.missing is none }} [{{ d.missing }}] {{ d.sub.missing is defined }}", {"d": {"sub": {}}}),
    ("filters_basic", "{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ [1, 2, 3] | length }}|{{ 'héllo' | length }}|{{ d | length }}|{{ 42 | string }}|{{ 'Ab' | lower }}|{{ 'Ab' | upper }}|{{ 'a-b-c' | replace('-', '+') }}|{{ [1, 2] | first }}|{{ [1, 2] | last }}|{{ [1, 2, 3] | join(', ') }}|{{ 'abc' | list }}|{{ '12' | int + 1 }}|{{ 'x' | int }}|{{ 3.9 | int }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'x' | safe }}|{{ [3, 1, 2] | sort }}|{{ [1, 1, 2] | unique | list }}|{{ [1, 2] | reverse | list }}|{{ [1, 2.5] | sum }}|{{ [4, 2, 8] | max }}|{{ -3 | abs }}|{{ '<a href=\"x\">' | e }}", {"d": {"a": 1, "b": 2}}),
    ("filters_attr", "{{ users | selectattr('active') | map(attribute='name') | join(',') }}|{{ users | rejectattr('active') | map(attribute='name') | list }}|{{ users | selectattr('name', 'equalto', 'b') | list | length }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(', ') }}|{{ users | map(attribute='age', default=0) | list }}|{{ ['a', 'B'] | map('upper') | join }}|{{ users | map(attribute='info.city') | list }}", {"users": [{"name": "a", "active": True, "age": 3, "info": {"city": "X"}}, {"name": "b", "active": False, "info": {"city": "Y"}}]}),
    ("tojson", "{{ v | tojson }}\n{{ v | tojson(indent=2) }}\n{{ v | tojson(separators=(',', ':')) }}\n{{ v | tojson(ensure_ascii=true) }}\n{{ v | tojson(sort_keys=true) }}\n{{ [] | tojson(indent=2) }}{{ {} | tojson }}{{ 'ü\\n\"\\\\\\x01' | tojson }}", {"v": {"z": [1, 2.0, None, True, "é😀"], "a": {"nested": {}}, "f": 1e-7, "big": 12345678901234567}}),
    ("string_escapes", "{{ 'a\\tb\\\\c\\'d\"e' }}|{{ \"x\\ny\" }}|{{ 'caf\\u00e9' }}|{{ 'a' 'b' }}|{{ '\\d' }}", {}),
    ("list_dict_literals", "{{ [1, 'two', [3]] }} {{ {'a': 1, 'b': [2, 3]} }} {{ {'a': 1}['a'] }} {{ (1) }} {{ (1, 'a') }} {{ (2,) }} {{ () }} {{ [] }} {{ {} }}", {}),
    ("arithmetic_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 1 + 2 ~ 3 }} {{ 7 % 4 }} {{ 1 - -1 }}", {}),
    ("filter_precedence", "{{ 'a' ~ 'b' | upper }} {{ -1 | abs }} {{ not 'x' | length }} {{ [1, 2] | length > 1 }} {{ 'x' + 'y' | upper }}", {}),
    ("strftime_now", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M:%S') }}", {}),
    ("raise_exception", "{% if fail %}{{ raise_exception('Custom failure: ' ~ what) }}{% endif %}ok", {"fail": True, "what": "bad role"}),
    ("error_undefined_attribute", "line one\n{{ x.y.z }}", {}),
    ("error_concat_undefined", "{{ 'a' + missing }}", {}),
    ("error_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("error_syntax", "{% if x %}unterminated", {}),
    ("error_unknown_filter", "{{ 1 | nosuchfilter }}", {}),
    ("set_shadowing_context", "{% set messages = messages[1:] %}{{ messages | length }}{% for m in messages %}{{ m }}{% endfor %}", {"messages": ["a", "b", "c"]}),
    ("loop_variable_reassigned", "{% for tc in calls %}{% if tc.function is defined %}{% set tc = tc.function %}{% endif %}{{ tc.name }},{% endfor %}", {"calls": [{"function": {"name": "f"}}, {"name": "g"}]}),
    ("in_operator_mapping_keys", "{{ 'tool_calls' in m }} {{ 'content' in m }} {{ 'x' in ['x'] }} {{ 1 in [1.0] }}", {"m": {"content": "hi"}}),
    ("error_concat_binds_tighter_than_plus", "{{ 1 ~ 2 + 3 }}", {}),
    ("dict_global_and_range", "{{ dict(a=1, b='x') }} {{ range(3) | list }} {{ range(1, 7, 2) | list }}", {}),
]


def feature_goldens():
    cases = []
    for name, source, context in FEATURES:
        out, err = render(source, context)
        case = {"name": name, "template": source, "context": context}
        if err is None:
            case["expected"] = out
        else:
            case["error"] = err
        cases.append(case)
    return cases


def write(path, cases):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/gen_template_goldens.py", "jinja2": jinja2.__version__,
                   "now": list(FIXED_NOW.timetuple()[:6]), "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"{path}: {len(cases)} cases ({n_err} expect an error)")


if __name__ == "__main__":
    write(os.path.join(DATA, "goldens.json"), template_goldens())
    write(os.path.join(DATA, "features.json"), feature_goldens())
