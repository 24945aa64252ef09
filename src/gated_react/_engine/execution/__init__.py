"""Running a call: the tool runner (argument check, timeout, retries, bounded result), the
result as the run keeps it, and the deadlines model and tool calls must return by."""
