"""The package's version, as installed: what ``gated_react.__version__`` and
``gated-react --version`` say, and what each run records as the release that wrote it."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version


@cache
def package_version() -> str:
    """Read once per process (a package's metadata takes milliseconds; a worker builds a graph
    per job); ``"unknown"`` in a source tree that was never installed."""
    try:
        return version("gated-react")
    except PackageNotFoundError:
        return "unknown"
