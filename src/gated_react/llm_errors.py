"""Model failures mapped to stop reasons a user can act on.

Matching is by class name and HTTP status so this module needs no provider SDK at import time
and works for any LangChain chat model whose client raises the usual exception types.
"""

from __future__ import annotations

from gated_react.stops import Stop, StopReason
from gated_react.untrusted import error_text

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
    text = error_text(exc, *secrets)[:300]
    if _TIMEOUTS.intersection(names):
        return Stop(StopReason.LLM_TIMEOUT, message=f"the model did not answer in time ({text})")
    kind = _kind(exc, names, text)
    status = getattr(exc, "status_code", None)
    where = f"HTTP {status}: " if isinstance(status, int) else ""
    return Stop(StopReason.LLM_ERROR, kind, message=f"model call failed ({kind}): {where}{text}")


def _kind(exc: BaseException, names: list[str], text: str) -> str:
    status = getattr(exc, "status_code", None)
    code = str(getattr(exc, "code", "") or "")
    if code == "context_length_exceeded" or any(h in text.lower() for h in _CONTEXT_HINTS):
        return "context_length"
    if status in _KINDS_BY_STATUS:
        return _KINDS_BY_STATUS[status]
    named = [_KINDS_BY_NAME[name] for name in names if name in _KINDS_BY_NAME]
    if named:
        return named[0]
    return "server_error" if isinstance(status, int) and status >= 500 else names[0]
