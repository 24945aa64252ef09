"""Settings from the environment, read in this one place (the CLI, the Studio factories)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything gated-react takes from environment variables."""

    model_config = SettingsConfigDict(extra="ignore", use_attribute_docstrings=True)

    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    """API key for OpenAI or any OpenAI-compatible server."""
    openai_model: str = Field(default="gpt-4.1-mini", validation_alias="OPENAI_MODEL")
    """Model name sent to the server."""
    openai_base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    """An OpenAI-compatible server (vLLM, llama.cpp, Ollama); None means OpenAI itself."""
    openai_timeout_seconds: float = Field(
        default=60.0, gt=0, validation_alias="OPENAI_TIMEOUT_SECONDS"
    )
    """Seconds one model request may take before it counts as ``llm_timeout``."""
    openai_max_retries: int = Field(default=2, ge=0, le=10, validation_alias="OPENAI_MAX_RETRIES")
    """Retries with backoff (by the OpenAI client) for 429, 5xx and connection errors."""
    db: str | None = Field(
        default=None, validation_alias=AliasChoices("GATED_REACT_DB", "GATED_REACT_STORE")
    )
    """Where runs are stored: a path, ``sqlite:///...``, ``postgresql://...`` or ``memory``."""

    def store_url(self) -> str:
        """The store to use: ``GATED_REACT_DB`` or the SQLite file in the user's state folder."""
        return self.db or str(default_state_dir() / "runs.sqlite")

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be printed or logged."""
        key = self.openai_api_key.get_secret_value() if self.openai_api_key else ""
        return (key,) if key else ()


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/gated-react``, by default ``~/.local/state/gated-react``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gated-react"
