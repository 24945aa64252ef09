"""``python -m gated_react.workers``: the command lives in ``command.py``, so nothing the queue
registers (the task) is defined in ``__main__``."""

import signal

# SIGUSR1 asks a worker where it waits (stacks.py) and a supervisor to ask its workers: one
# that comes while this process still starts is ignored, not the end of it (its default).
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

from gated_react.workers.command import main  # noqa: E402

raise SystemExit(main())
