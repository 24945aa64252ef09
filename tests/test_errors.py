"""The one exception base and the one-line formatters every error message goes through."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil

import pytest
from pydantic import BaseModel, ValidationError

import gated_react
from gated_react.errors import (
    GatedReactError,
    causes,
    exception_line,
    one_line,
    printable,
    printable_json,
    validation_line,
)


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(gated_react.__path__, "gated_react."):
        if info.name.endswith(("__main__", "_sql_worker")):
            continue  # the SQL worker is a standard-library
            # script run in its own process: its errors reach the tool as one line of text
        if ".examples.files" in info.name:
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_every_exception_the_package_defines_derives_from_the_one_base() -> None:
    classes = _exception_classes()
    assert len(classes) >= 13, [c.__name__ for c in classes]
    strays = [f"{c.__module__}.{c.__name__}" for c in classes if not issubclass(c, GatedReactError)]
    assert strays == []


def test_the_base_keeps_each_errors_ordinary_type() -> None:
    from gated_react.runs import NotWaiting, ThreadExists, UnknownThread

    assert issubclass(ThreadExists, ValueError)
    assert issubclass(NotWaiting, ValueError)
    assert issubclass(UnknownThread, LookupError)
    assert gated_react.GatedReactError is GatedReactError


def test_exception_line_is_one_line_with_secrets_masked() -> None:
    exc = RuntimeError("failed:\n  Authorization: Bearer abcdefghijkl\n  key sk-live-123456 xyz")
    line = exception_line(exc, "xyz")
    assert "\n" not in line
    assert "abcdefghijkl" not in line
    assert "123456" not in line
    assert "xyz" not in line


def test_exception_line_first_only_keeps_the_drivers_sentence() -> None:
    exc = OSError("database is locked\nQUERY: SELECT 1")
    assert exception_line(exc, first_only=True) == "database is locked"
    assert exception_line(OSError(""), first_only=True) == "OSError"
    assert exception_line(OSError("")) == ""


def test_exception_line_survives_a_broken_str() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert exception_line(Broken()) == "(message cannot be shown)"


class _Model(BaseModel):
    name: str
    count: int


def _error(**data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Model.model_validate(data)
    return caught.value


def test_validation_line_names_each_field_on_one_line() -> None:
    line = validation_line(_error(count="many"))
    assert line == (
        "name: Field required; count: Input should be a valid integer, unable to parse "
        "string as an integer"
    )
    assert validation_line(_error(count="many"), limit=1) == "name: Field required"


def test_validation_line_shows_the_input_and_the_root() -> None:
    line = validation_line(_error(name="x", count="y" * 100), show_input=True)
    assert line.endswith(f"(got {repr('y' * 100)[:37]}...)")
    with pytest.raises(ValidationError) as caught:
        _Model.model_validate(3)
    assert validation_line(caught.value, root="context").startswith("context: ")


def test_one_line_folds_all_whitespace() -> None:
    assert one_line(" a\n\tb  c \r\n") == "a b c"


def test_printable_shows_every_terminal_control_as_an_escape() -> None:
    text = "a\x1b[2J\x1b]0;title\x07b\rc\x00\x7f\x9b\u202e\u2066 ok é 👍"
    assert printable(text) == (
        "a\\x1b[2J\\x1b]0;title\\x07b\\x0dc\\x00\\x7f\\x9b\\u202e\\u2066 ok é 👍"
    )
    assert printable("line\r\nnext\tcol\n") == "line\nnext\tcol\n"  # layout is kept
    assert printable(printable("\x1b")) == printable("\x1b")  # escaping twice changes nothing


def test_printable_json_keeps_the_value_and_escapes_what_json_leaves_raw() -> None:
    value = {"k": "\x1b[2J \x9b \x7f \u202e é"}
    text = printable_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(text) == value
    assert all(char.isprintable() for char in text.replace("\n", ""))
    assert "\\u009b" in text
    assert "é" in text


def test_printable_json_escapes_every_line_break_splitlines_knows() -> None:
    value = {"k": "a\u2028b\u2029c\x85d\x1ce\x0bf"}
    text = printable_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert text.splitlines() == [text]
    assert "\\u2028" in text


def test_causes_walks_what_an_error_was_raised_from_nearest_first() -> None:
    outer = RuntimeError("library")
    outer.__cause__ = KeyError("driver")
    assert [type(e) for e in causes(outer)] == [RuntimeError, KeyError]
    assert [type(e) for e in causes(outer, depth=1)] == [RuntimeError]
