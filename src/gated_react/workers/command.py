"""The ``python -m gated_react.workers`` command line: one worker, or a supervisor of ``-n``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from gated_react.errors import StoreError, one_line
from gated_react.settings import Settings
from gated_react.store.key import store_key
from gated_react.workers import watch
from gated_react.workers.queue import queue_store
from gated_react.workers.supervisor import Supervisor, worker_command
from gated_react.workers.worker import load_factory, work


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gated_react.workers``: run one worker, or supervise ``-n`` of them."""
    from gated_react import workers

    parser = argparse.ArgumentParser(
        prog="python -m gated_react.workers", description=workers.__doc__
    )
    parser.add_argument("--store", required=True, help="postgresql:// URL for runs and queue")
    parser.add_argument("--graph", required=True, help="graph factory, module:function")
    parser.add_argument(
        "-n", "--processes", type=int, help="supervise this many worker processes (kept alive)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=1, help="jobs (runs) at once per process (default 1)"
    )
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--stalled-after", type=float, default=30.0, help="heartbeat timeout")
    parser.add_argument("--name", default="worker", help="worker name (logs)")
    watch.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        if args.concurrency < 1:
            raise ValueError(f"--concurrency {args.concurrency}: at least one job at once")
        watch.check_ports(watch.options(args), args.processes or 1)
        queue_store(args.store)
        store_key(Settings().store_keys())  # a bad GATED_REACT_STORE_KEY: exit 2, once
        factory = load_factory(args.graph)
        if args.processes is not None:
            return supervise(args)
        asyncio.run(
            work(
                args.store,
                factory,
                concurrency=args.concurrency,
                burst=args.burst,
                stalled_after=args.stalled_after,
                name=args.name,
                observe=watch.options(args),
            )
        )
    except (StoreError, ValueError) as exc:  # a bad setting's pydantic text, too: one line
        print(f"gated-react worker: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def supervise(args: argparse.Namespace) -> int:
    """``-n N``: N worker processes kept alive (``supervisor.py``)."""
    if args.processes < 1:
        raise ValueError(f"-n {args.processes}: at least one worker process")
    command = worker_command(
        args.store,
        args.graph,
        concurrency=args.concurrency,
        burst=args.burst,
        stalled_after=args.stalled_after,
    )
    observe = watch.options(args)
    return Supervisor(command, args.processes, burst=args.burst, observe=observe).run()
