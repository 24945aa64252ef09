"""Chat models from settings: ``ChatOpenAI`` with its own timeout and retry-with-backoff."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from gated_react.settings import Settings


class ModelNotConfigured(RuntimeError):
    """No model to talk to: neither an API key nor a base URL is set."""


def chat_model(
    settings: Settings, *, model: str | None = None, base_url: str | None = None
) -> BaseChatModel:
    """A ``ChatOpenAI`` for OpenAI or any compatible server, at temperature 0."""
    from langchain_openai import ChatOpenAI  # slow import (about a second): only when needed

    url = base_url or settings.openai_base_url
    key = settings.openai_api_key
    if key is None and url is None:
        raise ModelNotConfigured(
            "no model configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local "
            "OpenAI-compatible server"
        )
    return ChatOpenAI(
        model=model or settings.openai_model,
        base_url=url,
        # Local servers accept any key; the client insists on one.
        api_key=key or "not-needed",
        timeout=settings.openai_timeout_seconds,
        max_retries=settings.openai_max_retries,
        temperature=0,
    )
