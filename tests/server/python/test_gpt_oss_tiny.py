"""The openai client against `zinc serve` with a tiny random gpt-oss that speaks harmony
(o200k-tiny's tokens, gpt-oss's chat template): what the API returns from harmony
replies. Random weights make random text, so these tests check structure: once the
analysis ends (the budget ends it), the response format's JSON always comes and
conforms, a required call is a call with conforming arguments, and no harmony tag
reaches a client."""
import json

import jsonschema
from replies import extra, streamed_text

TAGS = ("<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>")
USER = [{"role": "user", "content": "What is the weather like in Oslo?"}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Forecast", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Clock",
                                           "parameters": {"type": "object", "properties": {}}}}]


def chat(server, budget=None, **kw):
    args = dict(model=server.model_id, messages=USER, max_tokens=200, temperature=0.8)
    args.update(kw)
    if budget is not None:
        args["extra_body"] = {"thinking_budget": budget}
    return server.client().chat.completions.create(**args)


def no_tags(*texts):
    for t in texts:
        assert not any(tag in (t or "") for tag in TAGS), t


def test_response_format_always_answers_in_the_schema(gpt_oss):
    # A budget bounds the analysis (random weights seldom pick <|end|> themselves).
    for seed in (1, 2, 3):
        r = chat(gpt_oss, seed=seed, budget=8, response_format={"type": "json_schema",
                                                                "json_schema": {"name": "person", "schema": PERSON}})
        c = r.choices[0]
        assert c.finish_reason == "stop", r
        jsonschema.validate(json.loads(c.message.content), PERSON)
        no_tags(c.message.content, extra(c.message, "reasoning_content"))


def test_budget_ends_the_analysis_before_the_json(gpt_oss):
    for budget in (0, 5):
        r = chat(gpt_oss, seed=4, budget=budget,
                 response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
        m = r.choices[0].message
        reasoning = extra(m, "reasoning_content") or ""
        if budget == 0:
            assert not reasoning, reasoning
        assert r.usage.completion_tokens < 200 and r.choices[0].finish_reason == "stop", r
        jsonschema.validate(json.loads(m.content), PERSON)


def test_required_tool_call_conforms(gpt_oss):
    for seed, choice in ((5, "required"), (6, "required"),
                         (7, {"type": "function", "function": {"name": "get_weather"}})):
        r = chat(gpt_oss, seed=seed, budget=3, tools=TOOLS, tool_choice=choice)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", r
        assert len(c.message.tool_calls) == 1 and not c.message.content, r
        call = c.message.tool_calls[0].function
        if isinstance(choice, dict):
            assert call.name == "get_weather"
        schema = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}[call.name]
        jsonschema.validate(json.loads(call.arguments), schema)
        no_tags(extra(c.message, "reasoning_content"), call.arguments)


def test_streamed_reply_equals_the_whole_one(gpt_oss):
    kw = dict(seed=8, budget=6, response_format={"type": "json_schema",
                                                 "json_schema": {"name": "person", "schema": PERSON}})
    whole = chat(gpt_oss, **kw).choices[0].message
    reasoning, content = streamed_text(chat(gpt_oss, stream=True, **kw))
    assert content == whole.content and reasoning == (extra(whole, "reasoning_content") or "")
    jsonschema.validate(json.loads(content), PERSON)
