"""Test-wide settings."""

from __future__ import annotations

import os

# Nothing in the test suite may reach a hosted API or send traces.
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("OPENAI_API_KEY", None)
