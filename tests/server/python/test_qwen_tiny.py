"""The openai client against `zinc serve` with a tiny random qwen35moe that speaks the
Qwen tokenizer and the Qwen3.5 chat template: thinking, tools, JSON schemas and
concurrency. Random weights make random text, so these tests check structure."""
import json
import threading

import jsonschema
import pytest
from json_prefix import is_json_prefix
from replies import extra, streamed_text

CLOSING = "Considering the limited time by the user, I have to give the solution based on the thinking directly now."
USER = [{"role": "user", "content": "What is the weather like?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                            "days": {"type": "integer"}},
           "required": ["city", "days"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Forecast", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]


def chat(server, thinking=None, budget=None, **kw):
    args = dict(model=server.model_id, messages=USER, max_tokens=24, seed=7, temperature=0.8)
    args.update(kw)
    body = {}
    if thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": thinking}
    if budget is not None:
        body["thinking_budget"] = budget
    if body:
        args["extra_body"] = body
    return server.client().chat.completions.create(**args)


def test_thinking_budget_forces_the_closing_sentence(qwen):
    r = chat(qwen, max_tokens=120, thinking=True, budget=8)
    m = r.choices[0].message
    reasoning = extra(m, "reasoning_content")
    assert reasoning and reasoning.endswith(CLOSING), reasoning
    assert "</think>" not in reasoning and "</think>" not in (m.content or "")
    assert m.content and m.content.strip(), "the answer after the forced close is empty"


def test_thinking_streams_reasoning_separately(qwen):
    kw = dict(max_tokens=60, thinking=True, budget=4)
    whole = chat(qwen, **kw).choices[0].message
    reasoning, content = streamed_text(chat(qwen, stream=True, **kw))
    assert reasoning == extra(whole, "reasoning_content") and reasoning.endswith(CLOSING)
    assert content == whole.content


def test_thinking_off_has_no_reasoning(qwen):
    r = chat(qwen, thinking=False, budget=2)
    m = r.choices[0].message
    assert not extra(m, "reasoning_content")
    assert m.content and CLOSING not in m.content


def test_json_schema_output_validates(qwen):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
                                                        "maxItems": 2}},
              "required": ["name", "age", "tags"], "additionalProperties": False}
    for seed in (1, 2):
        r = chat(qwen, seed=seed, max_tokens=200,
                 response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
        assert r.choices[0].finish_reason == "stop", r
        reply = json.loads(r.choices[0].message.content)
        jsonschema.validate(reply, schema)
        assert list(reply) == ["name", "age", "tags"]  # the schema's order, as OpenAI's structured outputs
    # Any object: random weights may wander in a string until max_tokens, and then the
    # reply is a prefix of one.
    r = chat(qwen, max_tokens=200, response_format={"type": "json_object"})
    content = r.choices[0].message.content
    assert content.lstrip().startswith("{"), r
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)
    else:
        assert r.choices[0].finish_reason == "length" and is_json_prefix(content), r


def test_json_schema_after_a_budgeted_thought(qwen):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    r = chat(qwen, max_tokens=120, thinking=True, budget=5,
             response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    m = r.choices[0].message
    assert extra(m, "reasoning_content").endswith(CLOSING)
    jsonschema.validate(json.loads(m.content), schema)


def test_tool_call_round_trip(qwen):
    r = chat(qwen, tools=TOOLS, tool_choice="required", max_tokens=120)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.tool_calls
    call = c.message.tool_calls[0]
    assert call.function.name in ("get_weather", "get_time")
    args = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        jsonschema.validate(args, WEATHER)
    # Feed the result back: the template renders the call and the tool's answer.
    messages = USER + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                       {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    r2 = chat(qwen, messages=messages, tools=TOOLS, max_tokens=8)
    assert r2.choices[0].message.content
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens + 10


def test_named_tool_call_streams_as_a_delta(qwen):
    named = {"type": "function", "function": {"name": "get_weather"}}
    whole = chat(qwen, tools=TOOLS, tool_choice=named, max_tokens=120).choices[0]
    calls = []
    finish = None
    for chunk in chat(qwen, tools=TOOLS, tool_choice=named, max_tokens=120, stream=True):
        for c in chunk.choices:
            calls += c.delta.tool_calls or []
            finish = c.finish_reason or finish
    assert finish == "tool_calls" and len(calls) == 1
    assert calls[0].index == 0 and calls[0].function.name == "get_weather"
    assert calls[0].function.arguments == whole.message.tool_calls[0].function.arguments
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER)


def test_sixteen_concurrent_streams_match_sequential_runs(qwen):
    """Same seeds, same outputs, whether requests run alone or 16 at once (4 slots;
    16 queue places, since a burst arrives before the engine admits any of it)."""
    def one(seed, out):
        out[seed] = streamed_text(chat(qwen, seed=seed, max_tokens=12, temperature=1.0, stream=True,
                                       messages=[{"role": "user", "content": f"Story number {seed % 5}"}]))[1]

    alone = {}
    for seed in range(16):
        one(seed, alone)
    together, threads = {}, []
    for seed in range(16):
        threads.append(threading.Thread(target=one, args=(seed, together)))
        threads[-1].start()
    for t in threads:
        t.join()
    assert together == alone
    assert len(set(alone.values())) > 1


def test_sampling_fields_are_accepted_and_seeded(qwen):
    extra_fields = {"top_k": 20, "min_p": 0.02, "repetition_penalty": 1.1, "repeat_last_n": 32, "dry_multiplier": 0.8,
                    "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": 64,
                    "dry_sequence_breakers": ["\n", ":"]}
    outs = [chat(qwen, max_tokens=10, top_p=0.9, presence_penalty=0.5, frequency_penalty=0.5,
                 extra_body=extra_fields).choices[0].message.content for _ in range(2)]
    assert outs[0] and outs[0] == outs[1]


def test_completions_and_logprobs(qwen):
    client = qwen.client()
    r = client.completions.create(model=qwen.model_id, prompt="Once upon", max_tokens=4, seed=3, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == r.usage.completion_tokens == 4 and all(len(t) <= 2 for t in lp.top_logprobs)
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(
        model=qwen.model_id, prompt="Once upon", max_tokens=4, seed=3, stream=True) if ch.choices)
    assert streamed == r.choices[0].text
    c = chat(qwen, max_tokens=4, logprobs=True, top_logprobs=2).choices[0].logprobs.content
    assert len(c) == 4 and all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in c)


def test_echo_scoring_over_batched_prompts_and_choices(qwen):
    """Three prompts (one of them past a scoring chunk of 128 positions) times n = 2, echoed with
    their logprobs: the choices in prompt order, each starting with its prompt scored as alone."""
    client = qwen.client()
    prompts = ["Once upon", "tick tock " * 45, "The"]  # the second: 136 tokens
    args = dict(model=qwen.model_id, prompt=prompts, max_tokens=2, n=2, seed=5, echo=True, logprobs=1)
    r = client.completions.create(**args)
    assert [c.index for c in r.choices] == list(range(6))
    scored = [client.completions.create(model=qwen.model_id, prompt=p, max_tokens=0, echo=True, logprobs=1)
              for p in prompts]
    assert all(s.usage.completion_tokens == 0 and s.choices[0].finish_reason == "length" for s in scored)
    assert sum(s.usage.prompt_tokens for s in scored) == r.usage.prompt_tokens and scored[1].usage.prompt_tokens > 128
    for k, c in enumerate(r.choices):
        alone = scored[k // 2].choices[0].logprobs
        lp = c.logprobs
        assert c.text.startswith(prompts[k // 2]) and "".join(lp.tokens) == c.text
        assert lp.tokens[:len(alone.tokens)] == alone.tokens
        assert lp.token_logprobs[:len(alone.tokens)] == alone.token_logprobs
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert all(x <= 0 for x in lp.token_logprobs[1:])


def joined_by_index(stream):
    """A stream's choices by index: (reasoning, content or text, finish reason, logprob tokens), and its usage.
    Asserts that each choice opens with its role (chat) and finishes once."""
    got, usage = {}, None
    for chunk in stream:
        usage = chunk.usage or usage
        for c in chunk.choices:
            r, t, finish, tokens = got.get(c.index, ("", "", None, []))
            assert finish is None, f"choice {c.index} goes on after its finish chunk"
            if hasattr(c, "delta"):
                assert (c.index in got) == (c.delta.role is None), f"choice {c.index}'s role chunk"
                r, t = r + (extra(c.delta, "reasoning_content") or ""), t + (c.delta.content or "")
            else:
                t += c.text
                tokens = tokens + (c.logprobs.tokens if c.logprobs else [])
            got[c.index] = (r, t, c.finish_reason, tokens)
    return got, usage


def test_several_choices_stream_by_index(qwen):
    """n choices, and several prompts, stream together, each chunk naming its choice: every choice's text,
    finish reason and logprobs equal the same request's whole reply's, and the usage counts each prompt once."""
    client = qwen.client()
    args = dict(model=qwen.model_id, messages=USER, max_tokens=10, seed=7, temperature=0.8, n=3)
    whole = client.chat.completions.create(**args)
    got, usage = joined_by_index(client.chat.completions.create(stream=True, stream_options={"include_usage": True},
                                                                **args))
    assert sorted(got) == [0, 1, 2] and len({c.message.content for c in whole.choices}) == 3  # told apart
    assert [got[k][:3] for k in range(3)] == [(extra(c.message, "reasoning_content") or "", c.message.content or "",
                                              c.finish_reason) for c in whole.choices]
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, whole.usage.completion_tokens)

    args = dict(model=qwen.model_id, prompt=["Once upon", "tick tock"], max_tokens=6, seed=5, n=2, logprobs=1)
    whole = client.completions.create(**args)
    got, usage = joined_by_index(client.completions.create(stream=True, stream_options={"include_usage": True},
                                                           **args))
    assert sorted(got) == [0, 1, 2, 3] and len({c.text for c in whole.choices}) == 4
    assert [got[k][1:] for k in range(4)] == [(c.text, c.finish_reason, c.logprobs.tokens) for c in whole.choices]
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, whole.usage.completion_tokens)
