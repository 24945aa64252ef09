"""Where a run's chat model comes from: the one seam to change for another model source."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from gated_react.settings import Settings


def model_for_run(
    settings: Settings, *, model: str | None = None, base_url: str | None = None
) -> BaseChatModel:
    """The chat model for one run: flags first, then settings (environment variables).

    ``ChatOpenAI`` brings its own timeout and retries (``OPENAI_TIMEOUT_SECONDS``,
    ``OPENAI_MAX_RETRIES``). Raises ``ModelNotConfigured`` when nothing names a model server.
    """
    from gated_react.models import chat_model

    return chat_model(settings, model=model, base_url=base_url)


def model_name(settings: Settings, model: str | None) -> str:
    """The model name a run will ask for, for the header line."""
    return model or settings.openai_model
