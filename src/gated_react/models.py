"""Chat models: ``ChatOpenAI`` from settings, and the stand-in for graphs that never run."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from gated_react.errors import GatedReactError
from gated_react.policy import Policy
from gated_react.settings import Settings, check_base_url


class ModelNotConfigured(GatedReactError, RuntimeError):
    """No model to talk to: neither an API key nor a base URL is set, or the base URL given
    is not one."""


def chat_model(
    settings: Settings,
    *,
    model: str | None = None,
    base_url: str | None = None,
    policy: Policy | None = None,
) -> BaseChatModel:
    """A ``ChatOpenAI`` for OpenAI or any compatible server, at temperature 0, each request
    bounded by ``OPENAI_TIMEOUT_SECONDS``; retried by the client as ``client_retries`` says for
    the ``policy`` the graph runs under (None: ``OPENAI_MAX_RETRIES``)."""
    from langchain_openai import ChatOpenAI  # slow import (about a second): only when needed

    url = base_url or settings.openai_base_url
    if base_url:  # settings.openai_base_url was checked when it was read
        try:
            check_base_url(base_url)
        except ValueError as exc:
            raise ModelNotConfigured(f"base URL: {exc}") from None
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
        max_retries=client_retries(settings, policy),
        temperature=0,
        # Servers behind a base URL send no token counts when streaming unless asked: without
        # them a cost budget cannot hold under stream_mode="messages".
        stream_usage=True,
    )


def client_retries(settings: Settings, policy: Policy | None) -> int:
    """The chat client's own retries: none when the graph retries model errors itself
    (``Policy.model_retries`` > 0), since each of its attempts would be retried again by the
    client (a 500: 3 x 3 requests); else ``OPENAI_MAX_RETRIES``."""
    if policy is not None and policy.model_retries > 0:
        return 0
    return settings.openai_max_retries


def init_model(model: BaseChatModel | str) -> BaseChatModel:
    """The model given, or one from LangChain's ``"provider:model"`` string (``init_chat_model``,
    as ``create_agent`` takes it; the ``langchain`` extra and the provider's package); either
    way asked for its token usage when it streams (``with_stream_usage``)."""
    if not isinstance(model, str):
        if not isinstance(model, BaseChatModel):
            raise UnsupportedModel(f"expected a LangChain chat model, got {type(model).__name__}")
        return with_stream_usage(model)
    if not model.strip():
        raise UnsupportedModel(
            "the model is an empty string: name one as 'provider:model' (e.g. "
            "'openai:gpt-4.1-mini') or pass a LangChain chat model"
        )
    from gated_react.interop import LANGCHAIN_EXTRA, LangChainMissing

    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise LangChainMissing(LANGCHAIN_EXTRA) from None
    made = init_chat_model(model)
    if not isinstance(made, BaseChatModel):  # a configurable model, chosen per call
        raise UnsupportedModel(
            f"{model!r} gives a model chosen at each call (LangChain's configurable model); "
            "the gate prices and binds one model: name it as 'provider:model'"
        )
    return with_stream_usage(made)


class UnsupportedModel(GatedReactError, TypeError):
    """``build_graph`` was given something it cannot call as one chat model."""


def with_stream_usage(model: BaseChatModel) -> BaseChatModel:
    """A copy of ``model`` that reports token usage when it streams (``stream_usage=True``),
    when its class has the setting and it was left unset (``ChatOpenAI`` with a ``base_url``
    leaves it off): a streamed reply without counts cannot be priced, so a cost budget would
    stop the run. The user's object is never changed; one set to False is left as it is."""
    if "stream_usage" not in type(model).model_fields or getattr(model, "stream_usage", None):
        return model
    if "stream_usage" in model.model_fields_set and model.stream_usage is False:  # type: ignore[attr-defined]
        return model
    return model.model_copy(update={"stream_usage": True})


class NoModel(BaseChatModel):
    """The model of a graph that is only drawn or reads stored runs: the graph's shape never
    depends on its model, and a call means a bug, so it raises instead of answering."""

    @property
    def _llm_type(self) -> str:
        return "none"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("this graph only draws or reads runs; it has no model to call")
