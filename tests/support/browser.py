"""A real browser for tests: Debian's headless Chromium, the chat page of tests/browser bundled
with esbuild and served from 127.0.0.1, and puppeteer-core (Node) connecting to the browser.

The test starts Chromium itself, in its own process group, and kills that group when it is
done, so the browser and its renderers end on every path, even when the Node driver is killed
midway (puppeteer's own launcher would start it detached, out of the test's reach). Without
chromium, node or npm the tests skip with the reason; ``GATED_REACT_REQUIRE_BROWSER=1`` (CI)
fails them instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from .reaping import PATIENCE, reap, wait_for

BROWSER_JS = Path(__file__).resolve().parents[1] / "browser"
REQUIRE_VAR = "GATED_REACT_REQUIRE_BROWSER"
CHROMIUM_NAMES = ("chromium", "chromium-browser")
# Headless, as root in a container (no sandbox), with nothing that reaches the network by itself.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-crash-reporter",
    "--metrics-recording-only",
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


@dataclass(frozen=True)
class Tools:
    chromium: str
    node: str
    npm: str


def tools() -> Tools:
    """Chromium, node and npm, or a skip (a failure under ``GATED_REACT_REQUIRE_BROWSER=1``)."""
    chromium = next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    node, npm = shutil.which("node"), shutil.which("npm")
    if chromium and node and npm:
        return Tools(chromium, node, npm)
    found = {"chromium (apt-get install chromium)": chromium, "node": node, "npm": npm}
    why = f"the browser test needs {', '.join(k for k, v in found.items() if v is None)}"
    if os.environ.get(REQUIRE_VAR, "").strip() not in ("", "0"):
        pytest.fail(f"{why}, but {REQUIRE_VAR}=1 requires it", pytrace=False)
    pytest.skip(why)


def install(npm: str) -> None:
    """``npm ci`` in tests/browser unless every pinned package is installed at its version."""
    wanted: dict[str, str] = json.loads((BROWSER_JS / "package.json").read_text())["dependencies"]
    if all(_installed(name) == version for name, version in wanted.items()):
        return
    command = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run(command, cwd=BROWSER_JS, check=True, timeout=PATIENCE, capture_output=True)


def _installed(name: str) -> str | None:
    manifest = BROWSER_JS / "node_modules" / name / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.is_file() else None


def build(node: str, out: Path) -> Path:
    """The chat page bundled into ``out`` (tests/browser/build.mjs); returns ``out``."""
    command = [node, "build.mjs", str(out)]
    subprocess.run(command, cwd=BROWSER_JS, check=True, timeout=PATIENCE, capture_output=True)
    return out


@contextlib.contextmanager
def serving_pages(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on 127.0.0.1 (a thread of this process): yields the page's URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def chromium(executable: str, workdir: Path) -> Iterator[str]:
    """A headless Chromium with its own profile in ``workdir``: yields its DevTools endpoint
    (``ws://127.0.0.1:PORT/devtools/browser/ID``); its process group is killed afterwards."""
    profile = workdir / "profile"
    profile.mkdir(parents=True)
    command = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"]
    with (workdir / "chromium.log").open("wb") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        port_file = profile / "DevToolsActivePort"
        wait_for(lambda: len(_lines(port_file)) >= 2, proc, "Chromium's DevTools port")
        port, path = _lines(port_file)[:2]
        yield f"ws://127.0.0.1:{port}{path}"
    finally:
        reap(proc)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def drive(node: str, endpoint: str, api_url: str, page_url: str, shots: Path, **env: Any) -> Any:
    """Run tests/browser/drive.mjs against the browser: what the page showed, as JSON. ``env``
    values go to the driver as ``BROWSER_<NAME>`` variables, JSON-encoded."""
    shots.mkdir(parents=True, exist_ok=True)
    variables = {f"BROWSER_{k.upper()}": json.dumps(v) for k, v in env.items()}
    done = subprocess.run(
        [node, "drive.mjs", endpoint, api_url, page_url, str(shots)],
        cwd=BROWSER_JS,
        env={**os.environ, "BROWSER_PATIENCE_MS": str(int(PATIENCE * 1000)), **variables},
        capture_output=True,
        text=True,
        timeout=PATIENCE * 4,
        check=False,
    )
    assert done.returncode == 0, f"drive.mjs exited {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout)
