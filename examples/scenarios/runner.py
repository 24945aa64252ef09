"""Run an example's scenarios from the command line (the scripts in ``examples/`` call ``main``).

Without a model configured, every scenario runs with its scripted model and is checked against
its expected outcome (exit code 1 on a mismatch). With ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL``
set, one scenario (the main one unless ``--scenario`` names another) runs on that model; its
outcome is the model's, so it is shown, not checked.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from gated_react.errors import validation_line
from gated_react.examples import Example
from gated_react.graph import build_graph
from gated_react.models import chat_model
from gated_react.redact import redact
from gated_react.runs import Graph, run
from gated_react.settings import Settings
from gated_react.testing import ScriptedChatModel
from scenarios.spec import Scenario, Seed


def run_scenario(
    example: Example, scenario: Scenario, model: BaseChatModel, workdir: Path
) -> dict[str, Any]:
    """One run of ``scenario`` on ``model``, with the tools' files in ``workdir``: the result
    as ``run`` gives it (the answer, trace, history and usage with the run's end)."""
    goal, policy, tools = scenario.setup(example, workdir)
    graph: Graph = build_graph(model, tools, policy=policy)
    return dict(run(graph, goal))


def run_scripted(example: Example, scenario: Scenario) -> tuple[dict[str, Any], list[str]]:
    """The scenario on its scripted model in a scratch folder, and how it differs from expected."""
    model = ScriptedChatModel(replies=list(scenario.script))
    with tempfile.TemporaryDirectory(prefix=f"gated-react-{example.name}-") as scratch:
        result = run_scenario(example, scenario, model, Path(scratch))
    return result, scenario.expect.problems(result, scenario.goal or example.goal)


def describe(result: dict[str, Any], secrets: Sequence[str] = ()) -> list[str]:
    """A few readable lines about a result."""
    trace = result.get("trace", [])
    steps = result.get("usage", {}).get("steps", 0)
    calls = ", ".join(entry["tool"] for entry in trace) or "none"
    lines = [f"{result.get('stop_reason')} after {steps} steps; calls: {calls}"]
    lines.extend(
        f"observed {entry['error']} at step {entry['step']}"
        for entry in trace
        if entry.get("error")
    )
    if result.get("status") == "ok":
        lines.append(f"answer: {result.get('answer')}")
    else:
        lines.append(f"stopped: {result.get('message')}")
    return [redact(line, *secrets) for line in lines]


def _parser(seed: Seed, script: str) -> argparse.ArgumentParser:
    example = seed.example
    parser = argparse.ArgumentParser(
        prog=f"python {script}",
        description=f"{example.name}: {example.shows}. Scripted unless a model is configured "
        "(OPENAI_API_KEY or OPENAI_BASE_URL).",
    )
    parser.add_argument(
        "--scenario", choices=[s.name for s in seed.scenarios], help="run only this scenario"
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--scripted", action="store_true", help="use the scripted model even if one is configured"
    )
    parser.add_argument("--json", action="store_true", help="print each result as one JSON line")
    return parser


def main(seed: Seed, argv: Sequence[str] | None = None, *, script: str) -> int:
    """Run the scenarios of ``seed`` as ``python {script}``; returns the process exit code."""
    example = seed.example
    args = _parser(seed, script).parse_args(argv)
    if args.list:
        for scenario in seed.scenarios:
            print(f"{scenario.name:18} {scenario.shows}")
        return 0
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"error: bad setting {validation_line(exc, limit=1)}")
        return 2
    configured = settings.openai_api_key is not None or settings.openai_base_url is not None
    if configured and not args.scripted:
        return _live(example, seed.scenario(args.scenario), settings, as_json=args.json)
    chosen = [seed.scenario(args.scenario)] if args.scenario else list(seed.scenarios)
    return _scripted(example, chosen, as_json=args.json)


def _message(value: Any) -> dict[str, Any]:
    """A chat message of the result as JSON: its type and content, and the calls an AI
    message makes (its content is empty then)."""
    shown = {"type": value.type, "content": value.content}
    calls = getattr(value, "tool_calls", None)
    if calls:
        shown["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in calls]
    return shown


def _scripted(example: Example, chosen: list[Scenario], *, as_json: bool) -> int:
    failed = 0
    for scenario in chosen:
        result, problems = run_scripted(example, scenario)
        failed += bool(problems)
        if as_json:
            shown = {"scenario": scenario.name, "problems": problems, **result}
            print(json.dumps(shown, default=_message))
            continue
        mark = "ok" if not problems else "MISMATCH"
        print(f"[{mark}] {example.name} / {scenario.name}: {scenario.shows}")
        for line in [*describe(result), *(f"expected otherwise: {p}" for p in problems)]:
            print(f"    {line}")
    if not as_json:
        ok = len(chosen) - failed
        print(f"{ok} of {len(chosen)} scenarios ended as expected (scripted model)")
    return 1 if failed else 0


def _live(example: Example, scenario: Scenario, settings: Settings, *, as_json: bool) -> int:
    model = chat_model(settings)
    with tempfile.TemporaryDirectory(prefix=f"gated-react-{example.name}-") as scratch:
        result = run_scenario(example, scenario, model, Path(scratch))
    if as_json:
        shown = json.dumps({"scenario": scenario.name, **result}, default=_message)
        print(redact(shown, *settings.secrets()))
    else:
        print(f"{example.name} / {scenario.name} on {settings.openai_model}: {scenario.shows}")
        for line in describe(result, settings.secrets()):
            print(f"    {line}")
    return 0 if result.get("status") == "ok" else 1
