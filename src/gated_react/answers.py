"""What may stand in a question's answer besides a human's decision: the stand-in ``resume``
sends for an answer LangGraph cannot take, which the gate reads as a malformed answer.

It sits beside the state's ``Question`` (below the engine and the API), so ``runs``, which
writes it, and the engine's ``approval``, which reads it, share one home without the engine
importing the API.
"""

from __future__ import annotations

UNUSABLE_ANSWER = "unusable_answer"
"""The key of the stand-in for an answer LangGraph cannot take (one the store cannot hold, such
as an integer beyond 64 bits, or ``None``): the question is asked again with the reason, as for
any other malformed answer."""
