"""The resuming and approval guides' examples run as written (a scripted model for ChatOpenAI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import langchain_openai
import pytest

from ..support.docs import page, python_blocks
from ..support.helpers import REFUND_42
from ..support.scenarios import by_progress


def test_the_crash_resume_and_approval_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(langchain_openai, "ChatOpenAI", lambda **_: by_progress(REFUND_42))
    start, after_crash, *_ = python_blocks(page("guides/resuming.md"))
    approval, *_ = python_blocks(page("guides/approvals.md"))
    scope: dict[str, Any] = {}
    exec(start, scope)
    exec(after_crash, scope)
    assert scope["out"]["stop_reason"] == "success"
    assert scope["out"]["thread_id"] == "ticket-42"
    exec(approval, scope)
    assert scope["question"]["tool"] == "get_user_billing"
    assert scope["out"]["stop_reason"] == "success"
    assert (tmp_path / "runs.sqlite").exists()
