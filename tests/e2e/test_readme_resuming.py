"""The README's "Resuming runs" examples run as written (with a scripted model for ChatOpenAI)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import langchain_openai
import pytest

from ..support.helpers import REFUND_42
from ..support.scenarios import by_progress

README = Path(__file__).resolve().parents[2] / "README.md"


def section_code(title: str) -> list[str]:
    text = README.read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_crash_resume_and_approval_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(langchain_openai, "ChatOpenAI", lambda **_: by_progress(REFUND_42))
    start, after_crash, approval, *_ = section_code("Resuming runs")
    scope: dict[str, Any] = {}
    exec(start, scope)
    exec(after_crash, scope)
    assert scope["out"]["stop_reason"] == "success"
    assert scope["out"]["thread_id"] == "ticket-42"
    exec(approval, scope)
    assert scope["question"]["tool"] == "get_user_billing"
    assert scope["out"]["stop_reason"] == "success"
    assert (tmp_path / "runs.sqlite").exists()
