"""Where a run's chat model comes from: the one seam to change for another model source.

With neither ``OPENAI_API_KEY`` nor a base URL (flag or ``OPENAI_BASE_URL``), a run uses the
local llama.cpp model, started for the run and stopped after it, and says so in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from gated_react.settings import Settings


@dataclass(frozen=True)
class Model:
    """The chat model for one run and a label for the header line."""

    chat: BaseChatModel
    label: str
    local: bool


def uses_local(settings: Settings, base_url: str | None) -> bool:
    """True when nothing names a model server: the local model is the fallback."""
    return settings.openai_api_key is None and not (base_url or settings.openai_base_url)


@contextmanager
def model_for_run(
    settings: Settings,
    *,
    model: str | None = None,
    base_url: str | None = None,
    model_file: str | None = None,
) -> Iterator[Model]:
    """The chat model for one run: flags first, then settings (environment variables).

    ``ChatOpenAI`` brings its timeout (``OPENAI_TIMEOUT_SECONDS``); the graph retries a failed
    call (``OPENAI_MAX_RETRIES`` times: ``resources.graph_for``), the client never does. The
    local model's server lives exactly as long as the block.
    """
    if uses_local(settings, base_url):
        from gated_react.hosting import local

        with local.local_server(Path(model_file) if model_file else None) as server:
            sys.stderr.write(local.WARNING + "\n")
            sys.stderr.flush()
            chat = local.local_chat_model(server, timeout=settings.openai_timeout_seconds)
            yield Model(chat, f"local SmolLM2-135M at {server.base_url}", local=True)
        return
    from gated_react.models import chat_model
    from gated_react.policy import Policy

    retrying = Policy(model_retries=settings.openai_max_retries)  # the graph's, as graph_for's
    chat = chat_model(settings, model=model, base_url=base_url, policy=retrying)
    where = base_url or settings.openai_base_url or "OpenAI"
    yield Model(chat, f"{model or settings.openai_model} at {where}", local=False)
