"""What every command works with, from flags and settings: the settings, the run store and its
log file, and the graph over that store."""

from __future__ import annotations

import stat
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gated_react.cli.exits import CliError, user_errors
from gated_react.errors import validation_line

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from gated_react.cli.run_options import RunOptions
    from gated_react.policy import Budget
    from gated_react.runs import Graph
    from gated_react.settings import Settings


def settings() -> Settings:
    """Settings from the environment; a bad value is a one-line error naming the variable."""
    from pydantic import ValidationError

    from gated_react.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        raise CliError(validation_line(exc, limit=1)) from None


def store_url(config: Settings, db: str | None) -> str:
    """``--db``, else ``GATED_REACT_DB``, else the SQLite file in the XDG state folder; an SQLite
    path that is not a file is refused here, before anything opens it."""
    url = db or config.store_url()
    with user_errors():
        from gated_react.store.checkpointer import StoreURL

        store = StoreURL.parse(url)
    if store.kind == "sqlite":
        _refuse_non_file(Path(store.target).expanduser(), store.shown)
    return url


def fleet_store(url: str) -> str:
    """The Postgres connection string of ``url``, where the workers' queue lives; any other
    store is one line."""
    from gated_react.store.checkpointer import StoreURL

    with user_errors():
        store = StoreURL.parse(url)
    if store.kind != "postgres":
        raise CliError(f"store {store.shown}: the workers' queue lives in a postgresql:// store")
    return store.target


def _refuse_non_file(path: Path, shown: str) -> None:
    """SQLite writes ``<path>-journal`` beside what it opens: beside /dev/null that is
    /dev/null-journal, and a pipe or a folder can never hold a store anyway."""
    try:
        mode = path.stat().st_mode
    except OSError:  # missing (created on first use) or unreachable (SQLite says why)
        return
    if stat.S_ISREG(mode):
        return
    what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
    raise CliError(f"store {shown}: {path} is {what}; give the path of an SQLite file")


def shown(url: str) -> str:
    """The store URL as it may be printed (password masked)."""
    from gated_react.store.checkpointer import mask

    return mask(url)


def log_path(url: str, log: Path | None, no_log: bool) -> Path | None:
    """The run log: ``--log``, else next to a SQLite store, else in the XDG state folder, one
    file per Postgres database (thread ids are the databases' own: two may share one)."""
    if no_log:
        return None
    if log is not None:
        return log.expanduser()
    with user_errors():
        from gated_react.records.run_log import FILE_NAME
        from gated_react.settings import default_state_dir
        from gated_react.store.checkpointer import StoreURL

        store = StoreURL.parse(url)
    if store.kind == "sqlite":
        path = Path(store.target).expanduser()
        return path.with_name(path.name + ".log")
    if store.kind == "postgres":
        return default_state_dir() / _database_log(store.target)
    return default_state_dir() / FILE_NAME


def shared_log(url: str, log: Path | None, no_log: bool) -> Path | None:
    """The one run log every Postgres store shared before each had its own (``runs.log`` in
    the state folder): read by ``show``, so no line written there is lost; never edited, since
    other databases' threads may share a thread id. None for other stores."""
    from gated_react.records.run_log import FILE_NAME
    from gated_react.settings import default_state_dir
    from gated_react.store.checkpointer import StoreURL

    if no_log or log is not None or StoreURL.parse(url).kind != "postgres":
        return None
    path = default_state_dir() / FILE_NAME
    return path if path.is_file() else None


def _database_log(target: str) -> str:
    """``runs-<database>-<digest>.log``: the digest tells apart databases of one name on other
    servers or roles (the password plays no part: changing it keeps the file)."""
    import hashlib
    import json
    import re

    from psycopg.conninfo import conninfo_to_dict

    found = conninfo_to_dict(target)
    which = {key: str(found.get(key) or "") for key in ("host", "port", "dbname", "user")}
    digest = hashlib.sha256(json.dumps(which, sort_keys=True).encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", which["dbname"] or "postgres")[:40]
    return f"runs-{name}-{digest}.log"


def missing(url: str) -> bool:
    """True when ``url`` names an SQLite file that does not exist, given with ``--db`` or
    ``GATED_REACT_DB``: a command that only reads must not make it (a mistyped path would be a
    new, empty store, and its folders). The default store is made on first use."""
    from gated_react.errors import StoreError
    from gated_react.settings import default_state_dir
    from gated_react.store.checkpointer import StoreURL

    if url == str(default_state_dir() / "runs.sqlite"):
        return False
    try:
        store = StoreURL.parse(url)
    except StoreError:
        return False  # ``opened`` says why
    return store.kind == "sqlite" and not Path(store.target).expanduser().exists()


@contextmanager
def opened(url: str, *, create: bool = True) -> Iterator[BaseCheckpointSaver[Any]]:
    """The checkpointer for ``url``, signed with ``GATED_REACT_STORE_KEY`` if it is set; an
    unreachable or malformed store is a one-line error, and so is an SQLite file that does not
    exist unless ``create``."""
    from gated_react.store.checkpointer import open_checkpointer

    if not create and missing(url):
        raise CliError(
            f"no run store at {shown(url)}: nothing has run there (check --db or GATED_REACT_DB)"
        )
    key = settings().store_keys()
    with ExitStack() as stack:
        with user_errors():
            saver = stack.enter_context(open_checkpointer(url, key=key))
        yield saver


def graph_for(options: RunOptions, model: BaseChatModel, saver: Any) -> Graph:
    """The run's graph; checkpoints record ``options``, to be shown. Spans go where the
    ``OTEL_*`` settings say (nowhere unless they are set)."""
    from gated_react.graph import build_graph
    from gated_react.hosting.otel import setup_tracing

    setup_tracing(settings())
    tools = options.tools()
    # The graph retries model calls (OPENAI_MAX_RETRIES of them), the client none (model_for_run)
    policy = options.policy().replace(model_retries=settings().openai_max_retries)
    with user_errors():  # a cost budget for an unpriced model: one line
        graph = build_graph(model, tools, policy=policy, checkpointer=saver)
    return graph.with_config(metadata=options.metadata())


def run_budget(saver: Any, thread: str, metadata: Mapping[str, Any] | None) -> Budget:
    """The limits the thread's run is under, to show: its record's (the policy it opened
    under, with what humans granted since); for a run whose record this process cannot read,
    the options its checkpoints say it was started with (shown, never obeyed)."""
    from gated_react.cli.run_options import RunOptions, recorded
    from gated_react.policy import Budget
    from gated_react.runs import run_book

    tally = run_book(saver, thread).tally
    policy = tally.opened.body.get("policy") if tally.opened is not None else None
    budget = policy.get("budget") if isinstance(policy, dict) else None
    try:
        limits = Budget.model_validate(budget) if isinstance(budget, dict) else None
    except ValueError:  # a record of another version: the options' limits, as for no record
        limits = None
    if limits is None:
        limits = (recorded(metadata) or RunOptions()).budget()
    return limits.extended(tally.extensions) if tally.extensions else limits


def reader_graph(saver: Any) -> Graph:
    """A graph that only reads stored runs (it can never call a model or a tool)."""
    from gated_react.graph import idle_graph

    return idle_graph(saver)
