"""The official openai client against `zinc serve` with a real chat model (SmolLM2-135M)."""
import json

import jsonschema

MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Name three colors of the rainbow."}]


def greedy(client, model, **kw):
    args = dict(model=model, messages=MESSAGES, max_tokens=16, temperature=0)
    args.update(kw)
    return client.chat.completions.create(**args)


def collect_stream(stream):
    text, finish, usage, chunks = "", None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return text, finish, usage, chunks


def test_chat_reply_and_usage(smol):
    r = greedy(smol.client(), smol.model_id)
    c = r.choices[0]
    assert r.object == "chat.completion" and r.model == smol.model_id
    assert c.message.role == "assistant" and c.message.content.strip()
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 10 and 0 < u.completion_tokens <= 16
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    if c.finish_reason == "length":
        assert u.completion_tokens == 16
    # Greedy is deterministic; the second identical prompt comes from the prefix cache alike.
    assert greedy(smol.client(), smol.model_id).choices[0].message.content == c.message.content


def test_second_chat_turn_reuses_the_first_on_the_cpu(smol):
    """The CPU's default prefix block (128 tokens) lets a short conversation's next turn
    resume from the cache; blocks of 1024 would miss every conversation under 1024 tokens."""
    first = MESSAGES[:1] + [{"role": "user", "content": "Describe the sea in four long sentences. " * 20}]
    r = greedy(smol.client(), smol.model_id, messages=first, max_tokens=8)
    assert r.usage.prompt_tokens > 128
    second = first + [{"role": "assistant", "content": r.choices[0].message.content},
                      {"role": "user", "content": "And the sky?"}]
    r2 = greedy(smol.client(), smol.model_id, messages=second, max_tokens=8)
    assert r2.usage.prompt_tokens_details.cached_tokens >= 128, r2.usage


def test_stream_equals_non_stream(smol):
    client = smol.client()
    whole = greedy(client, smol.model_id)
    text, finish, usage, chunks = collect_stream(
        greedy(client, smol.model_id, stream=True, stream_options={"include_usage": True}))
    assert text == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert chunks > 3
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_stop_string_is_cut_and_never_sent(smol):
    client = smol.client()
    full = greedy(client, smol.model_id, max_tokens=20).choices[0].message.content
    assert len(full) > 12, full
    stop = full[6:11]  # a stop string that most likely spans two tokens
    cut = full[:full.index(stop)]
    r = greedy(client, smol.model_id, max_tokens=20, stop=[stop, "never appears"])
    assert r.choices[0].message.content == cut
    assert r.choices[0].finish_reason == "stop"
    text, finish, _, _ = collect_stream(greedy(client, smol.model_id, max_tokens=20, stop=stop, stream=True))
    assert text == cut and finish == "stop"


def test_seed_reproducibility(smol):
    client = smol.client()
    args = dict(temperature=1.0, top_p=1.0, max_tokens=8)
    a = greedy(client, smol.model_id, seed=42, **args).choices[0].message.content
    b = greedy(client, smol.model_id, seed=42, **args).choices[0].message.content
    assert a == b
    others = {greedy(client, smol.model_id, seed=s, **args).choices[0].message.content for s in (1, 2)}
    assert len(others | {a}) > 1, "different seeds all gave the same sample"


def test_logprobs(smol):
    r = greedy(smol.client(), smol.model_id, max_tokens=8, logprobs=True, top_logprobs=3)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
        # Greedy picks the most likely token.
        assert e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
    assert "".join(e.token for e in entries) == r.choices[0].message.content


def test_completions(smol):
    client = smol.client()
    r = client.completions.create(model=smol.model_id, prompt="The capital of France is", max_tokens=8,
                                  temperature=0, logprobs=2)
    c = r.choices[0]
    assert r.object == "text_completion" and c.text
    assert len(c.logprobs.tokens) == r.usage.completion_tokens and "".join(c.logprobs.tokens) == c.text
    assert all(len(t) == 2 for t in c.logprobs.top_logprobs)
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(
        model=smol.model_id, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True)
        if ch.choices)
    assert streamed == c.text


def test_named_tool_call_from_a_real_model(smol):
    """tool_choice naming a function: the grammar makes even a model without tool
    training emit a call whose arguments validate against the function's schema."""
    params = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                                "count": {"type": "integer"}}, "required": ["color", "count"]}
    tools = [{"type": "function", "function": {"name": "paint", "description": "Paint things", "parameters": params}}]
    r = greedy(smol.client(), smol.model_id, max_tokens=60, tools=tools,
               tool_choice={"type": "function", "function": {"name": "paint"}})
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert len(c.message.tool_calls) == 1
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "paint" and call.id
    jsonschema.validate(json.loads(call.function.arguments), params)
