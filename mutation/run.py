"""Mutation testing with mutmut, one module at a time (``make mutation``; not part of CI).

Each module runs in its own scratch copy of ``src/`` and ``tests/``: mutmut rewrites the code it
mutates and keeps its cache beside it, so the shared checkout is never touched, and a module's
own test selection (``modules.toml``) stays its own. Usage::

    python mutation/run.py [--workdir DIR] [MODULE ...]    # no MODULE: every module

Prints a Markdown table (also written to ``DIR/summary.md``) and, per module, the diff of each
mutant that was not killed (``DIR/<module>/survivors.md``). The score counts a timeout as
detected (a hang fails the run too); timed-out mutants are run a second time first, as the
wall-clock limit at the lowest priority also catches tests that were merely slow.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = Path(__file__).with_name("modules.toml")
MUTMUT = Path(sys.executable).with_name("mutmut")
COPIED = ("src", "tests", "pyproject.toml", "README.md", "docs")  # some tests read the docs
# Statuses that mean a test noticed the mutant (a hang counts: the run would never pass).
DETECTED = ("killed", "timeout", "segfault")


@dataclass(frozen=True)
class Score:
    module: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return self.counts["total"]

    @property
    def detected(self) -> int:
        return sum(self.counts[status] for status in DETECTED)

    def row(self) -> str:
        percent = 100 * self.detected / self.total if self.total else 100.0
        killed, hung = self.counts["killed"], self.detected - self.counts["killed"]
        left = self.total - self.detected
        return f"| {self.module} | {self.total} | {killed} | {hung} | {left} | {percent:.1f}% |"


def scratch(work: Path, path: str, tests: list[str]) -> None:
    """A fresh copy of the tree with a setup.cfg naming the one file and its tests."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=junk)
        else:
            shutil.copy2(source, work / name)
    selection = "".join(f"\n    {test}" for test in tests)
    (work / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = src\n"
        f"only_mutate = {path}\n"
        f"pytest_add_cli_args_test_selection ={selection}\n"
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n"  # one argument a line
        "use_git_change_detection = false\n"
        # Workers forked from a process that ran graphs inherit its thread pools' locks and
        # can hang: a surviving mutant then passes for a timeout. A fork server has run none.
        "process_isolation = forkserver\n"
    )


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    """Run mutmut in ``work``; its output goes to ``log`` when given (the spinner is noisy)."""
    command = [str(MUTMUT), *args]
    if log is None:
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=True)
        return done.stdout
    with log.open("w") as out:
        ran = subprocess.run(command, cwd=work, stdout=out, stderr=subprocess.STDOUT, check=False)
    code = ran.returncode
    if code != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(
            f"mutmut {' '.join(args)} failed ({code}) in {work}:\n{tail}\n"
            "(mutmut needs the module's selected tests, mutation/modules.toml, to pass first)"
        )
    return ""


def statuses(work: Path) -> dict[str, str]:
    """Every mutant's status, by name."""
    found = {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            found[name] = status
    return found


def rerun_timeouts(work: Path) -> None:
    """Run timed-out mutants once more: under nice and a busy machine the wall-clock limit
    also catches slow tests, and only a mutant that hangs twice counts as a hang."""
    slow = sorted(name for name, status in statuses(work).items() if status == "timeout")
    if slow:
        mutmut(work, "run", "--max-children", "1", *slow, log=work / "rerun.log")


def score(module: str, work: Path) -> Score:
    """The counts mutmut exports, and the diff of every mutant that was not killed."""
    mutmut(work, "export-cicd-stats")
    counts = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
    survivors = [
        f"## {status}\n\n```diff\n{mutmut(work, 'show', name)}```\n"
        for name, status in statuses(work).items()
        if status != "killed"  # a hang or crash is detected, but listed to be looked at
    ]
    (work / "survivors.md").write_text(f"# {module}: not killed\n\n" + "\n".join(survivors))
    return Score(module, counts)


def main(argv: list[str] | None = None) -> int:
    table = tomllib.loads(MODULES.read_text())
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(table))
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "gated-react-mutation"
    )
    options = parser.parse_args(argv)
    unknown = sorted(set(options.modules) - set(table))
    if unknown:
        parser.error(f"unknown modules {unknown}; known: {', '.join(table)}")
    scores = []
    for module in options.modules or list(table):
        work = options.workdir / module
        print(f"{module}: mutating {table[module]['path']} in {work}", flush=True)
        scratch(work, table[module]["path"], table[module]["tests"])
        mutmut(work, "run", "--max-children", "1", log=work / "run.log")
        rerun_timeouts(work)
        scores.append(score(module, work))
        print(f"{module}: {scores[-1].row()}", flush=True)
    lines = [
        "| module | mutants | killed | timeout | survived | score |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    summary = "\n".join([*lines, *(s.row() for s in scores)]) + "\n"
    (options.workdir / "summary.md").write_text(summary)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
