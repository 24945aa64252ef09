"""Settings are checked when they are read: a base URL that is not an http(s) URL with a host
and a valid port is refused with one line that does not repeat it (it may hold a password)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gated_react.errors import validation_line
from gated_react.models import ModelNotConfigured, chat_model
from gated_react.settings import Settings
from gated_react.store.key import store_key

EXPECTED = "expected an http:// or https:// URL such as http://127.0.0.1:8080/v1, but "


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://[::1", "it does not parse (Invalid IPv6 URL)"),
        ("http://[::1]]/v1", "its host in [brackets] is not an IPv6 address"),
        ("http://[nope]/v1", "it does not parse ("),
        ("not-a-url", "it has no scheme"),
        ("ftp://example.com/v1", "its scheme is 'ftp'"),
        ("http://", "it has no host"),
        ("http:///v1", "it has no host"),
        ("http://host:99999/v1", "it does not parse (Port out of range 0-65535)"),
        ("http://u:hunter2@host:port/v1", "it does not parse (Port could not be cast"),
        ("http://a host/v1", "it contains spaces or control characters"),
        ("http://a^b/v1", "its host is not a host name"),
    ],
)
def test_a_base_url_that_is_not_one_is_refused_when_read(
    monkeypatch: pytest.MonkeyPatch, url: str, problem: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ValidationError) as caught:
        Settings()
    line = validation_line(caught.value, limit=1)
    assert line.startswith(f"OPENAI_BASE_URL: {EXPECTED}{problem}")
    assert "hunter2" not in line
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ModelNotConfigured, match=r"^base URL: expected an http"):
        chat_model(Settings(), base_url=url)  # the --base-url flag, Studio's context


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "https://api.openai.com/v1",
        "http://[::1]:8080/v1",
        "http://[fe80::1%25eth0]:8080/v1",
        "http://user:pass@localhost:11434/v1",
        "http://host:/v1",
    ],
)
def test_a_real_base_url_is_kept(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert Settings().openai_base_url == url
    assert chat_model(Settings(), base_url=url) is not None


def test_an_empty_model_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "")
    with pytest.raises(ValidationError, match="OPENAI_MODEL"):
        Settings()


def test_the_store_key_is_a_list_of_keys_and_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GATED_REACT_STORE_KEY=new,old``: the first signs, the others still read; the keys are
    masked wherever the settings' secrets are (run logs, worker lines, errors)."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", " new-key-0123456789 , old-key-0123456789 ,")
    settings = Settings()
    assert settings.store_keys() == ("new-key-0123456789", "old-key-0123456789")
    assert set(settings.store_keys()) <= set(settings.secrets())
    assert "new-key" not in repr(settings)
    monkeypatch.delenv("GATED_REACT_STORE_KEY")
    assert Settings().store_keys() == ()


@pytest.mark.parametrize("value", [",", " , ,"])
def test_a_store_key_of_commas_alone_is_refused_not_taken_as_none(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Before: the store went unsigned, as with no key at all."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", value)
    with pytest.raises(ValueError, match="store key 1 of 1 is shorter than 16 bytes"):
        store_key(Settings().store_keys())
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "  ")  # blank: no key, as when it is unset
    assert store_key(Settings().store_keys()) is None
