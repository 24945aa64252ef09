"""``python -m gated_react.workers``: the command lives in ``command.py``, so nothing the queue
registers (the task) is defined in ``__main__``."""

from gated_react.workers.command import main

raise SystemExit(main())
