"""Settings from the environment, read in this one place (the CLI, the Studio factories)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

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
    otel_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    """Where spans are sent (an OTLP collector or backend); setting it turns export on."""
    otel_protocol: Literal["http/protobuf", "grpc"] = Field(
        default="http/protobuf", validation_alias="OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    """OTLP over HTTP (``/v1/traces`` is appended to the endpoint) or gRPC."""
    otel_service_name: str = Field(default="gated-react", validation_alias="OTEL_SERVICE_NAME")
    """The ``service.name`` of every span this process exports."""
    otel_traces_exporter: Literal["otlp", "console", "none"] | None = Field(
        default=None, validation_alias="OTEL_TRACES_EXPORTER"
    )
    """``otlp`` (the default once an endpoint is set), ``console`` (spans printed) or ``none``."""
    otel_sdk_disabled: bool = Field(default=False, validation_alias="OTEL_SDK_DISABLED")
    """``true`` turns every export off, whatever else is set."""

    def store_url(self) -> str:
        """The store to use: ``GATED_REACT_DB`` or the SQLite file in the user's state folder."""
        return self.db or str(default_state_dir() / "runs.sqlite")

    def tracing_exporter(self) -> Literal["otlp", "console"] | None:
        """The exporter to configure, or None: tracing stays the API's no-op unless an endpoint or
        an exporter is set, and ``OTEL_SDK_DISABLED`` wins over both."""
        if self.otel_sdk_disabled or self.otel_traces_exporter == "none":
            return None
        if self.otel_traces_exporter is not None:
            return self.otel_traces_exporter
        return "otlp" if self.otel_endpoint else None

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be printed or logged."""
        key = self.openai_api_key.get_secret_value() if self.openai_api_key else ""
        return (key,) if key else ()


def capture_content() -> bool:
    """Whether spans may carry prompts, replies, tool arguments and results: the GenAI
    conventions' opt-in ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``,
    ``span_only`` or ``span_and_event``); read once per graph, at build time."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in _CAPTURE_ON


_CAPTURE_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/gated-react``, by default ``~/.local/state/gated-react``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gated-react"
