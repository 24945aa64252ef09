"""7b. A fresh llama-server per run, and the replay of one run's requests through it.

The server is the local extra's binary and model, started as ``gated_react.hosting.local`` starts it
(one slot, prompt cache on) plus a chat template that renders tools and tool calls. A new
process per run is the only isolation that holds: the slot cannot be erased without
``--slot-save-path``, and the server also keeps recent prompts in RAM (``--cache-ram``), where
a previous run's prefix could be found again.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gated_react.hosting import local

TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
THREADS = 1
"""On these 2 shared cores, ``-t 1`` prefilled about 2.5x faster than ``-t 2`` under load."""
TRAINED_CONTEXT = 8192
"""SmolLM2-135M's training context (its GGUF's ``llama.context_length``). The server caps a slot
there; a longer run's prompts only fit when that value is overridden, which changes the quality
of replies nobody reads here, not the work of prefilling them."""


def unavailable() -> str | None:
    """Why the server cannot run here, or None when it can."""
    try:
        local.binary_path()
        local.default_model_file()
    except local.LocalModelUnavailable as exc:
        return str(exc)
    return None


@contextlib.contextmanager
def server(context: int) -> Iterator[str]:
    """A ready llama-server for one run; yields its base URL and stops it on every way out."""
    port = local.free_port()
    command = [
        str(local.binary_path()),
        *("-m", str(local.default_model_file()), "--host", "127.0.0.1", "--port", str(port)),
        *("--offline", "--no-webui", "-np", "1", "-c", str(context), "-t", str(THREADS)),
        *("--jinja", "--chat-template-file", str(TEMPLATE)),
    ]
    if context > TRAINED_CONTEXT:
        command += ["--override-kv", f"llama.context_length=int:{context}"]
    log = Path(tempfile.mkstemp(prefix="bench-llama-", suffix=".log")[1])
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        local.wait_ready(process, local.LocalServer(pid=process.pid, port=port, log=log))
        base = f"http://127.0.0.1:{port}"
        # Warm-up (first-call allocations) on a prompt whose first token no chat prompt shares,
        # so the run's first request still starts from an empty cache.
        post(base, "/completion", {"prompt": "Warm", "n_predict": 1, "cache_prompt": False})
        yield base
    finally:
        local.stop(process)
        log.unlink(missing_ok=True)


def post(base: str, path: str, body: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return json.loads(reply.read())  # type: ignore[no-any-return]
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise RuntimeError(f"llama-server {path} answered {exc.code}: {detail}") from None


def replay(base: str, requests: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Send each request in order; what the server reports for each: prompt tokens, how many
    came from its cache (``cache_n``), how many it computed (``prompt_n``) and in how long."""
    out = []
    for payload in requests:
        timings = post(base, "/v1/chat/completions", payload)["timings"]
        out.append(
            {
                "tokens": timings["cache_n"] + timings["prompt_n"],
                "cache_n": timings["cache_n"],
                "prompt_n": timings["prompt_n"],
                "prompt_ms": timings["prompt_ms"],
            }
        )
    return out
