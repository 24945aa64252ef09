"""Settings from the environment, read in this one place (the CLI, the Studio factories)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, AliasChoices, Field, SecretStr
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

URL_EXAMPLE = "http://127.0.0.1:8080/v1"


def check_base_url(url: str) -> str:
    """``url`` when it is an http:// or https:// URL with a host (and a port from 0 to 65535, if
    it names one); a ValueError saying what is wrong otherwise, without repeating the URL (it
    may hold credentials). The client would raise deep inside a request, or retry a URL that
    can never connect."""
    problem = _url_problem(url)
    if problem is not None:
        raise ValueError(
            f"expected an http:// or https:// URL such as {URL_EXAMPLE}, but {problem}"
        )
    return url


def _url_problem(url: str) -> str | None:
    if any(char.isspace() or not char.isprintable() for char in url):
        return "it contains spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parsed only when read: a port that is not one raises here)
    except ValueError as exc:
        return f"it does not parse ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"its scheme is {parts.scheme!r}" if parts.scheme else "it has no scheme"
    if not parts.hostname:
        return "it has no host"
    return _host_problem(parts.netloc.rpartition("@")[2], parts.hostname)


def _host_problem(where: str, host: str) -> str | None:
    """What urlsplit lets through that the HTTP client refuses: stray brackets, odd signs."""
    if "[" in where or "]" in where:
        try:
            if where.count("[") != 1 or where.count("]") != 1:
                raise ValueError(where)
            ipaddress.IPv6Address(host)
        except ValueError:
            return "its host in [brackets] is not an IPv6 address"
    elif set(host) & set('[]<>{}|\\^`"'):
        return "its host is not a host name"
    return None


def _checked_url(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        return check_base_url(url)
    except ValueError as exc:  # the message as it is, without pydantic's "Value error, "
        raise PydanticCustomError("url", str(exc)) from None


class Settings(BaseSettings):
    """Everything gated-react takes from environment variables."""

    model_config = SettingsConfigDict(extra="ignore", use_attribute_docstrings=True)

    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    """API key for OpenAI or any OpenAI-compatible server."""
    openai_model: str = Field(default="gpt-4.1-mini", min_length=1, validation_alias="OPENAI_MODEL")
    """Model name sent to the server."""
    openai_base_url: Annotated[str | None, AfterValidator(_checked_url)] = Field(
        default=None, validation_alias="OPENAI_BASE_URL"
    )
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
    store_key: SecretStr | None = Field(default=None, validation_alias="GATED_REACT_STORE_KEY")
    """The store key (16 bytes or more): every checkpoint and write is signed with it, and a row
    it did not sign is refused. Rotation: ``new,old``; the first signs, the others still read."""
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
    studio_base_urls: str = Field(default="", validation_alias="GATED_REACT_STUDIO_BASE_URLS")
    """Base URLs besides ``OPENAI_BASE_URL`` that a Studio context's ``base_url`` may name,
    comma-separated (``*``: any): the server sends its API key there."""
    studio_workspaces: str = Field(default="", validation_alias="GATED_REACT_STUDIO_WORKSPACES")
    """Folders (separated by ``:``) that a Studio context's ``workspace_root`` may name, with
    everything under them, besides ``GATED_REACT_STUDIO_WORKSPACE``."""

    def store_url(self) -> str:
        """The store to use: ``GATED_REACT_DB`` or the SQLite file in the user's state folder."""
        return self.db or str(default_state_dir() / "runs.sqlite")

    def store_keys(self) -> tuple[str, ...]:
        """The store keys, the signing one first; empty: the store is not signed. A value that
        holds no key (``,``) is one empty key, which ``store.key.store_key`` refuses: the
        store must not go unsigned because of a typo."""
        text = self.store_key.get_secret_value() if self.store_key else ""
        keys = tuple(key.strip() for key in text.split(",") if key.strip())
        return keys or (("",) if text.strip() else ())

    def tracing_exporter(self) -> Literal["otlp", "console"] | None:
        """The exporter to configure, or None: tracing stays the API's no-op unless an endpoint or
        an exporter is set, and ``OTEL_SDK_DISABLED`` wins over both."""
        if self.otel_sdk_disabled or self.otel_traces_exporter == "none":
            return None
        if self.otel_traces_exporter is not None:
            return self.otel_traces_exporter
        return "otlp" if self.otel_endpoint else None

    def may_send_key_to(self, url: str) -> bool:
        """Whether a client-chosen base URL is one the operator named: the server's own
        ``OPENAI_BASE_URL`` or one in ``GATED_REACT_STUDIO_BASE_URLS``."""
        named = [self.openai_base_url or "", *self.studio_base_urls.split(",")]
        allowed = {entry.strip().rstrip("/") for entry in named if entry.strip()}
        return "*" in allowed or url.strip().rstrip("/") in allowed

    def studio_roots(self) -> tuple[Path, ...]:
        """The folders a Studio context's ``workspace_root`` may be in, resolved against the
        server's folder: the default workspace and those in ``GATED_REACT_STUDIO_WORKSPACES``."""
        named = [studio_workspace(), *self.studio_workspaces.split(os.pathsep)]
        return tuple(server_path(entry.strip()) for entry in named if entry.strip())

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be printed or logged."""
        key = self.openai_api_key.get_secret_value() if self.openai_api_key else ""
        return ((key,) if key else ()) + self.store_keys()


def capture_content() -> bool:
    """Whether spans may carry prompts, replies, tool arguments and results: the GenAI
    conventions' opt-in ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``,
    ``span_only`` or ``span_and_event``); read once per graph, at build time."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in _CAPTURE_ON


_CAPTURE_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})


def studio_workspace() -> str:
    """The folder Studio's ``workbench`` graph confines its workspace tools to unless the
    assistant names one: ``GATED_REACT_STUDIO_WORKSPACE`` (the repository's ``langgraph.json``
    sets its sample project), else the folder the server runs in; read when Studio imports it."""
    return os.environ.get("GATED_REACT_STUDIO_WORKSPACE") or "."


def server_path(folder: str) -> Path:
    """A folder as the server resolves it: ``~`` expanded, relative to the server's folder,
    links followed."""
    return (Path.cwd() / Path(folder).expanduser()).resolve()


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/gated-react``, by default ``~/.local/state/gated-react``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gated-react"
