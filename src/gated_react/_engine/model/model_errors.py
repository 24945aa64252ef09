"""Model failures mapped to stop reasons a user can act on.

Matching is by class name and HTTP status so this module needs no provider SDK at import time
and works for any LangChain chat model whose client raises the usual exception types.
"""

from __future__ import annotations

from gated_react._engine.storable import error_text
from gated_react.stops import Stop, StopReason

_TIMEOUTS = frozenset(
    {"APITimeoutError", "TimeoutException", "TimeoutError", "ReadTimeout", "ConnectTimeout"}
)
_KINDS_BY_NAME = {
    "RateLimitError": "rate_limited",
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "APIConnectionError": "connection",
    "RemoteProtocolError": "connection",
    "ConnectError": "connection",
    "InternalServerError": "server_error",
    "NotFoundError": "not_found",
}
_KINDS_BY_STATUS = {
    400: "bad_request",
    401: "auth",
    403: "auth",
    404: "not_found",
    429: "rate_limited",
}
# Data errors raised while a provider client parsed a reply (a body that is not JSON, empty or
# null ``choices``, a non-dict payload): the server answered, but not with a chat completion.
_PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)
_CLIENT_PACKAGES = frozenset({"openai", "langchain_openai"})
# An empty ``choices`` list becomes a result without generations, which LangChain then indexes
# (IndexError); a stream that yields no chunk, as when a server answers a streaming call with a
# plain completion, LangChain refuses with a ValueError: raised there, both are the reply's fault.
_NO_GENERATION = "langchain_core.language_models"
_ASSEMBLY_ERRORS = (IndexError, ValueError)
_CONTEXT_HINTS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "too many tokens",
)


def classify(exc: BaseException, *secrets: str) -> Stop:
    """The stop for a failed model call, with a one-line message free of secrets (``secrets``
    are masked whatever their shape: a server may echo the API key it was sent)."""
    names = [cls.__name__ for cls in type(exc).__mro__]
    text = error_text(exc, *secrets)[:300] or type(exc).__name__
    if _TIMEOUTS.intersection(names):
        return Stop(StopReason.LLM_TIMEOUT, message=f"the model did not answer in time ({text})")
    kind = _kind(exc, names, text)
    status = getattr(exc, "status_code", None)
    where = f"HTTP {status}: " if isinstance(status, int) else ""
    if kind == "bad_response":
        where = "the reply is not a valid chat completion: "
    return Stop(StopReason.LLM_ERROR, kind, message=f"model call failed ({kind}): {where}{text}")


def _kind(exc: BaseException, names: list[str], text: str) -> str:
    status = getattr(exc, "status_code", None)
    code = str(getattr(exc, "code", "") or "")
    if code == "context_length_exceeded" or any(h in text.lower() for h in _CONTEXT_HINTS):
        return "context_length"
    if status in _KINDS_BY_STATUS:
        return _KINDS_BY_STATUS[status]
    if "APIResponseValidationError" in names or _raised_parsing_a_reply(exc):
        return "bad_response"
    named = [_KINDS_BY_NAME[name] for name in names if name in _KINDS_BY_NAME]
    if named:
        return named[0]
    return "server_error" if isinstance(status, int) and status >= 500 else names[0]


def _raised_parsing_a_reply(exc: BaseException) -> bool:
    """A data error whose traceback passes through the provider's client code."""
    if not isinstance(exc, _PARSE_ERRORS):
        return False
    tb = exc.__traceback__
    module = ""
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] in _CLIENT_PACKAGES:
            return True
        tb = tb.tb_next
    return isinstance(exc, _ASSEMBLY_ERRORS) and module.startswith(_NO_GENERATION)
