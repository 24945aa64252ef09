"""The reliability suite: deterministic hypothesis settings and shared toolkits (the figures
of ``tally.py`` are printed by ``tests/conftest.py``, which every xdist controller loads).

Hypothesis runs derandomized (the same examples on every run, so CI never flakes); set
``GATED_REACT_HYPOTHESIS=explore`` for fresh random examples. Sizes come from the environment:
``GATED_REACT_FUZZ_EXAMPLES`` (parser properties, default 400), ``GATED_REACT_FUZZ_RUNS`` (whole
runs per protocol, default 200) and ``GATED_REACT_SOAK_RUNS`` (default 300; full size 1000).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from .kit import Toolkits, make_toolkits

_COMMON = {
    "deadline": None,  # a shared 2-core machine: per-example time is not a property
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
settings.register_profile("ci", derandomize=True, database=None, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("explore", **_COMMON)  # type: ignore[arg-type]
settings.load_profile(os.environ.get("GATED_REACT_HYPOTHESIS", "ci"))


@pytest.fixture(scope="session")
def toolkits(tmp_path_factory: pytest.TempPathFactory) -> Toolkits:
    """Every shipped toolkit on fresh files: a workspace, an SQLite file, a search corpus."""
    return make_toolkits(Path(tmp_path_factory.mktemp("toolkits")))
