"""OpenTelemetry spans after the GenAI semantic conventions: the agent's invocation, the
gate's guardrail checks, and what each span carries."""
