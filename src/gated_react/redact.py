"""Secrets never leave the process in results, logs or messages."""

from __future__ import annotations

import re
from typing import Any

# Each rule with text every match of it contains, lowercased: ASCII text without it cannot
# match, so most texts (a log line, a node's update) skip most of the scans. Only ASCII text
# skips: under IGNORECASE a few other letters match ASCII ones (the long s, U+017F, matches "s").
_RULES = (
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}"), r"\1-***", "k-"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-~+/=]{6,}"), r"\1 ***", "bearer"),
    (
        re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\n,}]+"),
        r"\1***",
        "authorization",
    ),
    (re.compile(r"(?i)(api[_-]?key['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+"), r"\1***", "key"),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(@)"), r"\1***\2", "://"),
    (re.compile(r"(?i)(password['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}&]+"), r"\1***", "password"),
)


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with the given secrets and anything shaped like a key, token or password masked."""
    text = mask_secrets(text, secrets)
    lowered = text.lower() if text.isascii() else None
    for pattern, replacement, needed in _RULES:
        if lowered is None or needed in lowered:
            text = pattern.sub(replacement, text)
    return text


_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/?#@:]+@", re.IGNORECASE)


def redact_url(url: str, *secrets: str | None) -> str:
    """A URL as it may be shown: a user name without a password masked whole (it is often
    the key itself: ``http://KEY@host``), then ``redact`` (which masks a password)."""
    return redact(_USERINFO.sub(r"\1***@", url), *secrets)


def mask_secrets(text: str, secrets: tuple[str | None, ...]) -> str:
    """``text`` with each known secret value replaced by ``***`` (values under 4 characters
    are skipped: masking every "a" would destroy the text and hide nothing)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def secrets_of(model: Any) -> tuple[str, ...]:
    """The secret values a client object holds (its ``SecretStr`` fields: API keys, tokens), so
    an error or a reply that echoes one, as some servers do on a 401, is masked before storing."""
    from pydantic import SecretStr  # not at import: the CLI's start-up path imports this module

    fields = getattr(model, "__dict__", {}).values()
    found = {value.get_secret_value() for value in fields if isinstance(value, SecretStr)}
    return tuple(sorted(secret for secret in found if len(secret) >= 4))


def masked_in(value: Any, secrets: tuple[str | None, ...], *, documents: bool = False) -> Any:
    """``value`` with each known secret masked in every string it holds (lists, tuples and
    dicts are copied; with ``documents``, LangChain ``Document``s too: their text and metadata;
    anything else is passed as it is)."""
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, dict):
        return {key: masked_in(item, secrets, documents=documents) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked_in(item, secrets, documents=documents) for item in value]
    if documents and hasattr(value, "page_content") and hasattr(value, "model_copy"):
        text, metadata = (
            mask_secrets(value.page_content, secrets),
            masked_in(value.metadata, secrets),
        )
        return value.model_copy(update={"page_content": text, "metadata": metadata})
    return value
