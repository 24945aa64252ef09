"""Tests of the examples: the package's (package/) and the repository's scripts (scripts/)."""
