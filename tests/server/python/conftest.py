"""Fixtures for the OpenAI-client tests of `zinc serve` (run by ctest as server_openai).

Environment: ZINC_BINARY (the zinc executable), ZINC_SOURCE_DIR (the checkout),
ZINC_TEST_CACHE_DIR (where test models are written).

Three models:
- SmolLM2-135M-Instruct (real weights, models/, scripts/fetch_smollm2.sh): chat, stop,
  seeds, logprobs, tool-call format with a real chat model.
- a tiny random qwen35moe with a real Qwen tokenizer and the Qwen3.5 chat template
  (`zinc synth --vocab --chat-template`): thinking, tools, JSON schemas, concurrency,
  limits. Random weights give random text, so its tests check structure.
- a tiny random gpt-oss with o200k-tiny (gpt-oss's tokenizer in small, harmony's
  special tokens; tests/data/text) and gpt-oss's chat template: the harmony reply's
  channels, constraints and budget through the API, again by structure.
"""
import http.client
import json
import os
import re
import subprocess
import time
from pathlib import Path

import openai
import pytest

ZINC = os.environ.get("ZINC_BINARY", "")
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[3]))
CACHE = Path(os.environ.get("ZINC_TEST_CACHE_DIR", "/tmp/zinc-test-cache")) / "server"
SMOLLM2 = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_TOKENIZER = SOURCE.parent / "shared" / "testdata" / "tokenizers" / "qwen3"
API_KEY = "test-key"


def run(*args):
    subprocess.run([ZINC, *map(str, args)], check=True, stdout=subprocess.DEVNULL)


class Server:
    """A `zinc serve` process on a free port."""

    def __init__(self, model, *extra):
        # Output goes to a file: a pipe nobody reads could fill up and block the server.
        CACHE.mkdir(parents=True, exist_ok=True)
        self.log = CACHE / (Path(model).stem + ".serve.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([ZINC, "serve", "-m", str(model), "--port", "0", *map(str, extra)],
                                         stdout=log, stderr=subprocess.STDOUT)
        m = None
        deadline = time.time() + 120
        while not m and self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
            m = re.search(r"http://([\d.]+):(\d+)", self.log.read_text())
        if not m:
            self.proc.kill()
            raise RuntimeError("zinc serve did not start: " + self.log.read_text())
        self.host, self.port = m.group(1), int(m.group(2))
        self.model_id = Path(model).stem
        self.key = API_KEY if "--api-key" in extra else None
        self.clients = {}

    def client(self, **kw):
        """One client per set of options: its connections are reused, not left idle on the server."""
        key = tuple(sorted(kw.items()))
        if key not in self.clients:
            args = dict(base_url=f"http://{self.host}:{self.port}/v1", api_key=self.key or "unused", max_retries=0,
                        timeout=120)
            args.update(kw)
            self.clients[key] = openai.OpenAI(**args)
        return self.clients[key]

    def request(self, method, path, body=None, headers=None, timeout=60):
        """A raw HTTP request: (status, headers, body bytes)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), data

    def metrics(self):
        status, _, body = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, value = line.split()
                out[name] = float(value)
        return out

    def wait_idle(self, timeout=10):
        """Until no request holds a slot or waits; returns the seconds it took."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            m = self.metrics()
            if m["zinc_requests_running"] == 0 and m["zinc_requests_waiting"] == 0:
                return time.time() - t0
            time.sleep(0.05)
        raise AssertionError("the server is still busy: " + repr(self.metrics()))

    def stop(self):
        # Idle keep-alive connections would hold the server's shutdown for seconds.
        for c in self.clients.values():
            c.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        # A clean shutdown (also: no sanitizer report in an ASan build).
        assert self.proc.returncode == 0, self.log.read_text()[-4000:]


def vocab_gguf(xz_dir, name):
    """A vocab-only GGUF (`zinc vocab`) from a Hugging Face tokenizer stored as .xz files."""
    hf = CACHE / (name + "-hf")
    hf.mkdir(exist_ok=True)
    for file in ("tokenizer.json", "tokenizer_config.json"):
        with open(hf / file, "wb") as out:
            subprocess.run(["xz", "-dc", str(xz_dir / (file + ".xz"))], check=True, stdout=out)
    vocab = CACHE / (name + "-vocab.gguf")
    run("vocab", "--from-hf", hf, "-o", vocab)
    return vocab


def synth_chat_model(model, vocab, template, *synth_args):
    """`zinc synth` with a tokenizer and a chat template (tests/data/templates), written
    under a temporary name so that an interrupted run leaves no half model at `model`."""
    partial = model.with_name("partial-" + model.name)
    run("synth", *synth_args, "--vocab", vocab, "--chat-template", SOURCE / "tests" / "data" / "templates" / template,
        "-o", partial)
    partial.rename(model)
    return model


def cached_model(name, make):
    """CACHE / name, made by make(path) unless an earlier run left it there."""
    CACHE.mkdir(parents=True, exist_ok=True)
    model = CACHE / name
    return model if model.exists() else make(model)


@pytest.fixture(scope="session")
def qwen_model():
    def make(model):
        # The real Qwen tokenizer when the shared test data is there; SmolLM2's otherwise
        # (the Qwen template's tags are then plain text, which the server handles alike).
        if (QWEN_TOKENIZER / "tokenizer.json.xz").exists():
            vocab = vocab_gguf(QWEN_TOKENIZER, "qwen3")
        elif SMOLLM2.exists():
            vocab = SMOLLM2
        else:
            pytest.skip("no tokenizer: neither ../shared/testdata/tokenizers/qwen3 nor " + str(SMOLLM2))
        return synth_chat_model(model, vocab, "qwen3.5.jinja", "--preset", "tiny", "--type", "q8_0")

    return cached_model("qwen35moe-tiny-chat.gguf", make)


@pytest.fixture(scope="session")
def gpt_oss_model():
    def make(model):
        vocab = vocab_gguf(SOURCE / "tests" / "data" / "text" / "o200k-tiny", "o200k-tiny")
        return synth_chat_model(model, vocab, "gpt-oss.jinja", "--arch", "gpt-oss", "--preset", "tiny")

    return cached_model("gpt-oss-tiny-harmony.gguf", make)


@pytest.fixture(scope="session")
def gpt_oss(gpt_oss_model):
    s = Server(gpt_oss_model, "--parallel", 2, "--ctx", 1024, "--threads", 1)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def qwen(qwen_model):
    """Tiny qwen35moe: 4 slots, 16 queued at most, 512 positions, an API key, a 2 s read timeout."""
    s = Server(qwen_model, "--parallel", 4, "--queue", 16, "--ctx", 512, "--threads", 1, "--api-key", API_KEY,
               "--read-timeout", 2, "--prefix-block", 64, "--step-tokens", 256)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def smol():
    if not SMOLLM2.exists():
        pytest.skip(str(SMOLLM2) + " is absent (scripts/fetch_smollm2.sh)")
    s = Server(SMOLLM2, "--parallel", 2, "--ctx", 1024, "--threads", 2)
    yield s
    s.stop()
