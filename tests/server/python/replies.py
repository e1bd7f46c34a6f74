"""Reading chat replies from the openai client: the server's extra fields and a streamed
reply's parts."""


def extra(obj, name):
    """A field the openai types do not declare (reasoning_content), or None."""
    return getattr(obj, name, None) or (obj.model_extra or {}).get(name)


def streamed_text(stream):
    """A streamed reply's reasoning and content, each joined from its deltas."""
    reasoning, content = "", ""
    for chunk in stream:
        for c in chunk.choices:
            reasoning += extra(c.delta, "reasoning_content") or ""
            content += c.delta.content or ""
    return reasoning, content
