"""Scoring and several choices on /v1/completions with a real model (SmolLM2-135M): `echo` with
prompt logprobs, as lm-evaluation-harness's loglikelihood tasks ask for them, batched prompts and `n`.

The oracle for the prompt logprobs is llama.cpp's greedy continuation of tests/data/smollm2/prompt3
(greedy3.ids, which zinc's own greedy reply matches for all its 48 tokens): scored after the prompt,
each of its tokens must be the most likely one, and its logprob must be the one zinc reported while
generating the same tokens one at a time."""
import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "smollm2"


def ids(name):
    return [int(t) for t in (DATA / name).read_text().split()]


def complete(smol, **body):
    status, _, data = smol.request("POST", "/v1/completions", dict(model=smol.model_id, **body), timeout=120)
    assert status == 200, data
    return json.loads(data)


def test_echo_scores_llama_cpps_greedy_tokens_as_generation_saw_them(smol):
    prompt, greedy = ids("prompt3.ids"), ids("greedy3.ids")[:16]
    generated = complete(smol, prompt=prompt, max_tokens=16, temperature=0, logprobs=1)["choices"][0]
    scored = complete(smol, prompt=prompt + greedy, max_tokens=0, echo=True, logprobs=1)
    c = scored["choices"][0]
    lp = c["logprobs"]
    n = len(prompt) + len(greedy)
    assert scored["usage"] == {"prompt_tokens": n, "completion_tokens": 0, "total_tokens": n,
                               "prompt_tokens_details": {"cached_tokens": 0}}
    assert c["finish_reason"] == "length"
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert "".join(lp["tokens"]) == c["text"]
    assert all(x <= 0 for x in lp["token_logprobs"][1:])
    # The generation is llama.cpp's, token for token, and each of its tokens is the top-1 when scored.
    assert "".join(generated["logprobs"]["tokens"]) == "".join(lp["tokens"][len(prompt):])
    for k in range(len(prompt), n):
        top = lp["top_logprobs"][k]
        assert len(top) == 1 and max(top, key=top.get) == lp["tokens"][k], (k, top, lp["tokens"][k])
        assert abs(top[lp["tokens"][k]] - lp["token_logprobs"][k]) < 1e-6
    # One forward pass over the whole text and the decode steps that wrote it agree.
    for a, b in zip(lp["token_logprobs"][len(prompt):], generated["logprobs"]["token_logprobs"]):
        assert abs(a - b) < 2e-3, (a, b)


def test_lm_evaluation_harness_loglikelihood_request(smol):
    """The body lm-evaluation-harness's local-completions model sends for a loglikelihood request
    (token ids in a batch of one, max_tokens 1, echo, logprobs 1), read the way it reads it."""
    context, continuation = ids("prompt4.ids"), ids("greedy4.ids")[:5]
    out = complete(smol, prompt=[context + continuation], temperature=0, max_tokens=1, logprobs=1, seed=1234,
                   echo=True)
    (choice,) = sorted(out["choices"], key=lambda c: c["index"])
    lp = choice["logprobs"]
    token_logprobs = lp["token_logprobs"][len(context):-1]
    tokens, tops = lp["tokens"][len(context):-1], lp["top_logprobs"][len(context):-1]
    assert len(token_logprobs) == len(continuation)
    assert sum(token_logprobs) < 0
    assert all(tok == max(top, key=top.get) for tok, top in zip(tokens, tops))  # is_greedy
    assert out["usage"]["completion_tokens"] == 1


def test_echo_text_and_stream(smol):
    client = smol.client()
    prompt = "The capital of France is"
    r = client.completions.create(model=smol.model_id, prompt=prompt, max_tokens=6, temperature=0, echo=True,
                                  logprobs=2)
    c = r.choices[0]
    plain = client.completions.create(model=smol.model_id, prompt=prompt, max_tokens=6, temperature=0)
    assert c.text == prompt + plain.choices[0].text
    assert len(c.logprobs.tokens) == r.usage.prompt_tokens + r.usage.completion_tokens
    assert "".join(c.logprobs.tokens) == c.text
    assert c.logprobs.text_offset == sorted(c.logprobs.text_offset) and c.logprobs.text_offset[0] == 0
    assert all(len(t) == 2 for t in c.logprobs.top_logprobs[1:])
    chunks = [ch for ch in client.completions.create(model=smol.model_id, prompt=prompt, max_tokens=6,
                                                     temperature=0, echo=True, logprobs=2, stream=True)
              if ch.choices]
    assert "".join(ch.choices[0].text for ch in chunks) == c.text
    assert chunks[0].choices[0].text == prompt  # the echo comes whole, first
    streamed = [x for ch in chunks if ch.choices[0].logprobs for x in ch.choices[0].logprobs.token_logprobs]
    assert streamed[0] is None and streamed[1:] == pytest.approx(c.logprobs.token_logprobs[1:], abs=1e-6)
    # Echo without logprobs, and scoring alone without them.
    assert client.completions.create(model=smol.model_id, prompt=prompt, max_tokens=0, echo=True).choices[0].text \
        == prompt


def test_batched_prompts_and_n(smol):
    client = smol.client()
    prompts = ["The capital of France is", "Water boils at", ids("prompt0.ids")]
    alone = [client.completions.create(model=smol.model_id, prompt=p, max_tokens=6, temperature=0).choices[0].text
             for p in prompts]
    r = client.completions.create(model=smol.model_id, prompt=prompts, max_tokens=6, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.text for c in r.choices] == alone
    # n choices per prompt, choice k sampling with seed + k: reproducible, the prompt counted once.
    args = dict(model=smol.model_id, prompt="Once upon a time", max_tokens=8, temperature=1.0, n=3, seed=11)
    a, b = client.completions.create(**args), client.completions.create(**args)
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len({c.text for c in a.choices}) > 1
    one = client.completions.create(**dict(args, n=1, seed=12)).choices[0].text
    assert a.choices[1].text == one
    assert a.usage.prompt_tokens == client.completions.create(**dict(args, n=1)).usage.prompt_tokens
    assert 3 <= a.usage.completion_tokens <= 24
    chat = client.chat.completions.create(model=smol.model_id, messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=6, temperature=1.0, n=2, seed=3)
    assert [c.index for c in chat.choices] == [0, 1] and all(c.message.content for c in chat.choices)


def test_bad_scoring_requests(smol):
    for body, param in [(dict(prompt="a", max_tokens=0), "max_tokens"),
                        (dict(prompt=[[1, 2], []]), "prompt")]:
        status, _, data = smol.request("POST", "/v1/completions", dict(model=smol.model_id, **body))
        assert status == 400 and json.loads(data)["error"]["param"] == param, (body, data)
