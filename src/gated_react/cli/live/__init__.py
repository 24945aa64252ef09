"""Following a run as it goes: node updates as events, the live view, the run log, the session."""
