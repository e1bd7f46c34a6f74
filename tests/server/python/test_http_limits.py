"""What `zinc serve` does with bad input, a full queue, clients that leave, slow
clients and missing keys: the right 4xx/5xx in OpenAI's error shape, and the server
keeps serving everyone else."""
import http.client
import json
import re
import socket
import threading
import time

import openai
import pytest

BODY = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def error_of(server, body, path="/v1/chat/completions", headers=None):
    status, hdrs, data = server.request("POST", path, body, headers)
    if status != 200:
        err = json.loads(data)["error"]
        assert set(err) >= {"message", "type", "param", "code"} and err["message"]
    return status, hdrs, data


@pytest.mark.parametrize("body,status", [
    (b"{not json", 400),
    (b"[1, 2]", 400),
    (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400),  # invalid UTF-8
    ({"messages": []}, 400),
    ({"messages": "hi"}, 400),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "4"}, 400),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 400),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 0}, 400),
    ({"messages": [{"role": "user", "content": "hi"}], "model": "no-such-model"}, 404),
    ({"messages": [{"role": "user", "content": "word " * 2000}]}, 400),  # longer than the context
])
def test_bad_requests(qwen, body, status):
    assert error_of(qwen, body)[0] == status


def test_bad_completion_request_and_unknown_path(qwen):
    assert error_of(qwen, {"prompt": "a", "max_tokens": 0}, "/v1/completions")[0] == 400
    # One prompt of a batch too long for the context refuses the whole request.
    assert error_of(qwen, {"prompt": ["a", "word " * 2000]}, "/v1/completions")[0] == 400
    assert error_of(qwen, BODY, "/v1/nothing")[0] == 404


def test_huge_max_tokens_is_capped_by_the_context(qwen):
    r = qwen.client().completions.create(model=qwen.model_id, prompt="x " * 400, max_tokens=10**9, seed=1)
    c = r.choices[0]
    # The last token sampled needs no position of its own: prompt + reply may reach n_ctx + 1.
    if c.finish_reason == "length":
        assert r.usage.prompt_tokens + r.usage.completion_tokens in (512, 513)
    else:  # an end-of-generation token came first
        assert r.usage.prompt_tokens + r.usage.completion_tokens < 512


def test_api_key(qwen):
    assert error_of(qwen, BODY, headers={"Authorization": "Bearer wrong"})[0] == 401
    conn = http.client.HTTPConnection(qwen.host, qwen.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(BODY))
    r = conn.getresponse()
    assert r.status == 401 and json.loads(r.read())["error"]["type"] == "authentication_error"
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"http://{qwen.host}:{qwen.port}/v1", api_key="nope", max_retries=0).models.list()
    assert [m.id for m in qwen.client().models.list().data] == [qwen.model_id]


def post_head(server, *headers):
    """The head of a chat-completions POST with the key, then the given header lines."""
    lines = ["POST /v1/chat/completions HTTP/1.1", "Host: x", f"Authorization: Bearer {server.key}", *headers]
    return "\r\n".join(lines) + "\r\n\r\n"


def reply_to_oversize(server, head, body):
    """Sends a request whose body the server may refuse before it is all sent; the reply's first bytes."""
    s = socket.create_connection((server.host, server.port), timeout=10)
    s.sendall(head.encode())
    try:
        s.sendall(body)
    except OSError:
        pass  # the server may answer and close before the body is sent
    reply = s.recv(4096).decode(errors="replace")
    s.close()
    return reply


def test_huge_body_is_413(qwen):
    head = post_head(qwen, "Content-Type: application/json", f"Content-Length: {100 * 1024 * 1024}")
    reply = reply_to_oversize(qwen, head, b" " * (1 << 20))
    assert reply.startswith("HTTP/1.1 413"), reply


def test_json_sent_as_a_form_is_read_whole(qwen):
    """`curl -d` labels a JSON body application/x-www-form-urlencoded: over 8 KiB it is still
    read as JSON (httplib's plain handlers refuse such forms with 413)."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    padded = json.dumps(BODY).encode() + b" " * 20000
    status, _, data = qwen.request("POST", "/v1/chat/completions", padded, form)
    assert status == 200, data
    long = json.dumps({"messages": [{"role": "user", "content": "word " * 2000}]}).encode()
    status, _, data = error_of(qwen, long, headers=form)
    assert status == 400 and json.loads(data)["error"]["code"] == "context_length_exceeded", data


def read_reply(sock):
    """One reply from a connection: its head and its body (by Content-Length)."""
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(4096)
    length = re.search(rb"Content-Length: (\d+)", reply)
    while length and len(reply.split(b"\r\n\r\n", 1)[1]) < int(length[1]):
        reply += sock.recv(4096)
    return reply.decode(errors="replace")


def raw_request(server, head, body=b""):
    """Sends a request as written and returns the reply."""
    s = socket.create_connection((server.host, server.port), timeout=10)
    s.sendall(head.encode() + body)
    reply = read_reply(s)
    s.close()
    return reply


def test_chunked_bodies_are_held_to_the_limit(qwen):
    head = post_head(qwen, "Transfer-Encoding: chunked")
    body = json.dumps(BODY).encode()
    ok = raw_request(qwen, head, b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert ok.startswith("HTTP/1.1 200"), ok
    chunk = b" " * (1 << 20)  # 17 chunks of 1 MiB: over the default 16 MiB
    big = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(17)) + b"0\r\n\r\n"
    reply = reply_to_oversize(qwen, head, big)
    assert reply.startswith("HTTP/1.1 413"), reply


def test_post_without_a_body_is_answered_at_once(qwen):
    t0 = time.time()
    reply = raw_request(qwen, post_head(qwen))
    assert reply.startswith("HTTP/1.1 400") and "not valid JSON" in reply, reply
    assert time.time() - t0 < 1.5  # the read timeout is 2 s: no wait for a body that never comes


def test_multipart_is_refused_and_the_connection_serves_on(qwen):
    """The server reads a multipart body through before its 415, so the rest of it is not
    taken for the connection's next request."""
    s = socket.create_connection((qwen.host, qwen.port), timeout=10)
    form = b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nxyz\r\n--b--\r\n'
    s.sendall(post_head(qwen, "Content-Type: multipart/form-data; boundary=b", f"Content-Length: {len(form)}").encode())
    time.sleep(0.2)  # the body comes after the handler has started
    s.sendall(form)
    assert read_reply(s).startswith("HTTP/1.1 415")
    body = json.dumps(BODY).encode()
    s.sendall(post_head(qwen, "Content-Type: application/json", f"Content-Length: {len(body)}").encode() + body)
    reply = read_reply(s)
    s.close()
    assert reply.startswith("HTTP/1.1 200"), reply


def test_slow_client_is_dropped_and_others_are_served(qwen):
    s = socket.create_connection((qwen.host, qwen.port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess")
    others = qwen.client().chat.completions.create(model=qwen.model_id, messages=BODY["messages"], max_tokens=4)
    assert others.choices[0].message.content is not None
    # The server's 2 s read timeout ends the slow request, not this socket's 10 s: by
    # the time the other request is served (however slowly, under ASan on a loaded
    # machine) the connection is answered and closed, or closes within the 2 s.
    try:
        data = s.recv(4096)
    except TimeoutError:
        raise AssertionError("the server kept the slow client's connection open for 10 s")
    except OSError:
        data = b""  # reset by the server
    s.close()
    assert data == b"" or data.startswith(b"HTTP/1.1 4"), data


def stream_until_first_token(server, seed, n=1):
    """Opens a long stream of n choices, reads up to its first token, and returns the connection."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    body = {"messages": [{"role": "user", "content": f"long story {seed}"}], "max_tokens": 100000, "stream": True,
            "seed": seed, "n": n}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    events = 0
    while events < n + 1:  # the choices' role chunks (sent at once), then a generated token's: all hold slots
        events += r.fp.readline().startswith(b"data: ")
    return conn


def test_clients_that_leave_free_their_slots(qwen):
    qwen.wait_idle()
    conns = [stream_until_first_token(qwen, i) for i in range(4)]
    m = qwen.metrics()
    assert m["zinc_requests_running"] == 4
    for c in conns:
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    assert qwen.wait_idle(timeout=5) < 2, "slots were not freed when their clients left"


def test_a_client_that_leaves_a_stream_of_several_choices_frees_their_slots(qwen):
    qwen.wait_idle()
    conns = [stream_until_first_token(qwen, i, n=2) for i in range(2)]
    assert qwen.metrics()["zinc_requests_running"] == 4
    for c in conns:
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    assert qwen.wait_idle(timeout=5) < 2, "slots were not freed when their clients left"


def test_full_queue_answers_503_with_retry_after(qwen):
    qwen.wait_idle()
    conns = [stream_until_first_token(qwen, i) for i in range(4)]  # every slot busy
    waiting = []
    for i in range(16):  # fill the queue: these wait for a slot
        conn = http.client.HTTPConnection(qwen.host, qwen.port, timeout=60)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(dict(BODY, stream=True)),
                     headers={"Authorization": f"Bearer {qwen.key}", "Content-Type": "application/json"})
        waiting.append(conn)
    deadline = time.time() + 10
    while qwen.metrics()["zinc_requests_waiting"] < 16 and time.time() < deadline:
        time.sleep(0.05)
    status, headers, _ = error_of(qwen, BODY)
    assert status == 503 and "Retry-After" in headers
    for c in conns:
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    for c in waiting:  # they get their slots once the others leave
        r = c.getresponse()
        assert r.status == 200 and b"data: [DONE]" in r.read()
        c.close()
    qwen.wait_idle()


def test_metrics(qwen):
    qwen.client().chat.completions.create(model=qwen.model_id, messages=BODY["messages"], max_tokens=4)
    qwen.client().chat.completions.create(model=qwen.model_id, messages=BODY["messages"], max_tokens=4)
    m = qwen.metrics()
    for name in ("zinc_requests_total", "zinc_prompt_tokens_total", "zinc_generated_tokens_total",
                 "zinc_generation_tokens_per_second", "zinc_prompt_tokens_per_second"):
        assert m[name] > 0, name
    assert "zinc_requests_waiting" in m and "zinc_cached_tokens_total" in m
    _, _, body = qwen.request("GET", "/metrics")
    assert 'zinc_http_requests_total{path="/v1/chat/completions",status="200"}' in body.decode()


def test_non_streaming_client_that_leaves_frees_its_slot(qwen):
    qwen.wait_idle()
    s = socket.create_connection((qwen.host, qwen.port), timeout=10)
    body = json.dumps({"messages": [{"role": "user", "content": "long"}], "max_tokens": 100000}).encode()
    s.sendall(post_head(qwen, "Content-Type: application/json", f"Content-Length: {len(body)}").encode() + body)
    deadline = time.time() + 10
    while qwen.metrics()["zinc_requests_running"] < 1 and time.time() < deadline:
        time.sleep(0.05)
    assert qwen.metrics()["zinc_requests_running"] == 1
    s.close()
    assert qwen.wait_idle(timeout=5) < 2, "the slot was not freed when the client left"
