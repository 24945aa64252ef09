"""One plain-text table per comparison, from the results JSON."""

from __future__ import annotations

from typing import Any

from benchmarks.common import ratio
from benchmarks.prefix_cache import PRICED_AS


def _table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells[1:]]
    return "\n".join(lines)


def _med(entry: dict[str, Any], key: str) -> str:
    return f"{entry[key]['median']:.2f}" if entry else "-"


def _cpu_ratio(row: dict[str, Any], peer: str) -> Any:
    return row.get(f"ratio_vs_{peer}", {}).get("cpu", "-")


def step_time(rows: list[dict[str, Any]]) -> str:
    out = []
    for row in rows:
        out.append(
            [
                row["store"],
                row["durability"],
                row["steps"],
                _med(row["ours"], "cpu_ms_per_step"),
                _med(row.get("floor", {}), "cpu_ms_per_step"),
                _med(row["create_agent"], "cpu_ms_per_step"),
                _med(row["create_react_agent"], "cpu_ms_per_step"),
                _med(row.get("plain_loop", {}), "cpu_ms_per_step"),
                _cpu_ratio(row, "floor"),
                _cpu_ratio(row, "create_agent"),
                row["ratio_vs_create_agent"]["wall"],
            ]
        )
    header = [
        "store",
        "durability",
        "steps",
        "ours ms",
        "floor ms",
        "create_agent ms",
        "react_agent ms",
        "plain ms",
        "ours/floor",
        "ours/ca",
        "ours/ca wall",
    ]
    title = (
        "1. Framework time per ReAct step (median CPU ms; floor: a bare five-node LangGraph "
        "loop, same store and durability; ratios of CPU, and of wall to create_agent)"
    )
    return _table(title, header, out)


def run_length(rows: list[dict[str, Any]]) -> str:
    out = [
        [
            f"{row['store']}/{row['durability']}/{row['call']}",
            row["steps"],
            row["reps"],
            _med(row["ours"], "cpu_ms_per_step"),
            _med(row["floor"], "cpu_ms_per_step"),
            _med(row.get("create_agent", {}), "cpu_ms_per_step"),
            _cpu_ratio(row, "floor"),
            _cpu_ratio(row, "create_agent"),
        ]
        for row in rows
    ]
    header = ["config", "steps", "reps", "ours ms", "floor ms", "ca ms", "ours/floor", "ours/ca"]
    title = "1b. CPU per step by run length (median CPU ms; create_agent up to 100 steps)"
    return _table(title, header, out)


def tokens(rows: list[dict[str, Any]]) -> str:
    out = [
        [
            r["steps"],
            r["ours"]["total"],
            r["create_agent"]["total"],
            r["create_react_agent"]["total"],
            r["plain_loop"]["total"],
            r["ours"]["last_step"],
            r["create_agent"]["last_step"],
            r["ratio_vs_create_agent"],
        ]
        for r in rows
    ]
    header = [
        "steps",
        "ours total",
        "create_agent",
        "react_agent",
        "plain loop",
        "ours last step",
        "ca last step",
        "ours/ca",
    ]
    title = (
        "2. Prompt tokens sent over a whole run (approximate; not what a caching server computes)"
    )
    return _table(title, header, out)


def storage(rows: list[dict[str, Any]]) -> str:
    out = [
        [
            r["steps"],
            r["ours"]["bytes"],
            r["create_agent"]["bytes"],
            r["create_react_agent"]["bytes"],
            r["ours"]["bytes_per_step"],
            r["ratio_vs_create_agent"],
            r["ratio_vs_create_react_agent"],
        ]
        for r in rows
    ]
    header = [
        "steps",
        "ours bytes",
        "create_agent",
        "react_agent",
        "ours/step",
        "ours/ca",
        "ours/react",
    ]
    return _table("3. SQLite file size after one run", header, out)


def concurrency(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        ca = r["create_agent"]
        for peer in ("ours", "floor", "create_agent", "create_react_agent"):
            m = r.get(peer)
            if m is None:  # results from before the floor was measured
                continue
            both = "error" not in m and "error" not in ca
            out.append(
                [
                    r["store"],
                    f"{r['runs']}x{r['steps']}",
                    peer,
                    m.get("runs_per_second", m.get("error")),
                    m.get("peak_rss_mb", "-"),
                    ratio(m["runs_per_second"], ca["runs_per_second"]) if both else "-",
                    ratio(m["peak_rss_mb"], ca["peak_rss_mb"]) if both else "-",
                ]
            )
    return _table(
        "4. Concurrent runs with ainvoke (runs/s, peak RSS MB, both as ratios to create_agent)",
        ["store", "runs", "runtime", "runs/s", "peak MB", "runs/s / ca", "RSS / ca"],
        out,
    )


def resume(result: dict[str, Any]) -> str:
    rows = [
        [
            result["checkpoints"],
            result["first_node"],
            result["to_first_node_s"]["median"],
            result["imports_s"]["median"],
            result["beyond_imports_s"]["median"],
        ]
    ]
    header = ["checkpoints", "first node", "to first node s", "imports s", "beyond imports s"]
    return _table("5. Resume a crashed run from a new process", header, rows)


def cli_start(result: dict[str, Any]) -> str:
    n = result["store_runs"]
    rows = [
        ["--help", result["help_s"]["median"]],
        [f"runs, SQLite ({n} runs)", result["runs_sqlite_s"]["median"]],
    ]
    if "runs_postgres_s" in result:
        rows.append([f"runs, Postgres ({n} runs)", result["runs_postgres_s"]["median"]])
    return _table("6. CLI start (median wall s of a fresh process)", ["command", "seconds"], rows)


def _prefix_rows(result: dict[str, Any]) -> tuple[list[list[Any]], list[list[Any]]]:
    totals, ratios = [], []
    for row in result["rows"]:
        if "error" in row:
            totals.append([row["steps"], "failed:", row["error"]] + [""] * 8)
            continue
        for runtime, e in row["runtimes"].items():
            name = f"{runtime} (= {e['same_requests_as']})" if "same_requests_as" in e else runtime
            totals.append(
                [row["steps"], name, e["prompt_tokens"], e["processed"], f"{e['hit_rate']:.1%}",
                 f"{e['prefill_ms']['median'] / 1000:.1f}", round(e["cost_25"]),
                 round(e["cost_10"]), f"{e['usd']:.4f}", e["largest_prompt"],
                 len(e["breaks"])]
            )  # fmt: skip
            r = row["ratios"].get(runtime)
            if r:
                keys = ("prompt_tokens", "processed", "prefill_ms", "cost_25", "cost_10")
                ratios.append([row["steps"], runtime, *(r[k] for k in keys), r["usd"]])
    return totals, ratios


def _sizes(repetitions: dict[Any, int]) -> dict[int, int]:
    """Repetitions per run length, keyed by numbers again after a JSON round trip."""
    return {int(steps): reps for steps, reps in repetitions.items()}


def prefix_cache(result: dict[str, Any]) -> str:
    title = "7. On a real prefix-caching server (llama-server, one slot)"
    if "skipped" in result:
        return f"{title}: skipped, {result['skipped']}"
    totals, ratios = _prefix_rows(result)
    loads = [load for row in result["rows"] for load in row.get("load", ())] or [float("nan")]
    head = (
        f"{title}; interleaved runs per size {_sizes(result['repetitions'])}, medians; "
        f"-t {result['threads']}; "
        f"load average {min(loads):.1f} to {max(loads):.1f}"
    )
    header = ["steps", "runtime", "prompt tokens", "processed", "cache hits", "prefill s",
              "cost 25%", "cost 10%", f"USD {PRICED_AS}", "largest prompt", "breaks"]  # fmt: skip
    ratio_header = ["steps", "runtime", "tokens", "processed", "prefill", "cost 25%",
                    "cost 10%", "USD"]  # fmt: skip
    checked = [
        [c["steps"], c["runtime"], c["metric"], f"<= {c['target']}", c["ratio"],
         "met" if c["met"] else "missed"]
        for c in result["checks"]
    ]  # fmt: skip
    parts = [
        _table(head, header, totals),
        _table("7b. Ratios to create_agent", ratio_header, ratios),
    ]
    if checked:
        header = ["steps", "runtime", "metric", "target", "ratio", ""]
        parts.append(_table("7c. Targets (ratio to create_agent)", header, checked))
    return "\n\n".join(parts)


def tracing(result: dict[str, Any]) -> str:
    cpu = result["cpu_ms_per_step"]
    rows = [
        [mode, f"{cpu[mode]['median']:.3f}", f"{cpu[mode]['min']:.3f}", f"{cpu[mode]['max']:.3f}"]
        for mode in ("untraced", "api", "sdk")
    ]
    title = (
        f"8. Tracing per step (CPU ms, {result['steps']} steps, median of "
        f"{result['processes_per_mode']} processes per mode); api/untraced "
        f"{result['ratio_api_vs_untraced']}, sdk/api {result['ratio_sdk_vs_api']} "
        f"(+{result['sdk_extra_ms_per_step']:.3f} ms, {result['spans_per_step']} spans/step); "
        f"the API-alone tracing calls of a step, timed alone: "
        f"{result.get('api_helpers_us_per_step', '-')} us "
        f"({result.get('api_helpers_share_of_step', 0):.2%} of a step)"
    )
    return _table(title, ["mode", "median", "min", "max"], rows)


def fleet(result: dict[str, Any]) -> str:
    low, high = result["load_average"]
    title = (
        f"9. A fleet on Postgres: model {result['latency_s']} s per call,"
        f" {result['model_calls_per_run']} calls per run, {result['waves']} runs per slot;"
        f" load average {low:.1f} to {high:.1f}"
    )
    header = ["workers", "concurrency", "runs", "s", "runs/s", "ideal", "of ideal",
              "s per run", "jobs"]  # fmt: skip
    rows = [
        [r["workers"], r["concurrency"], r["runs"], r["seconds"], r["runs_per_s"],
         r["ideal_runs_per_s"], r["of_ideal"], r["seconds_per_run_median"],
         ", ".join(f"{n} {status}" for status, n in sorted(r["jobs"].items()))]
        for r in result["rows"]
    ]  # fmt: skip
    return _table(title, header, rows)


def store_key(rows: list[dict[str, Any]]) -> str:
    header = ["durability", "steps", "CPU ms/step without key", "with key", "added", "ratio",
              "signing ms/step", "read CPU ms without", "with", "ratio",
              "checking ms/run"]  # fmt: skip
    out = [
        [r["durability"], r["steps"], _med(r["without_key"], "cpu_ms_per_step"),
         _med(r["with_key"], "cpu_ms_per_step"), f"{r['cpu_ms_per_step_added']:+.3f}",
         r["ratio_cpu"], _med(r, "inside_sign_ms_per_step"),
         _med(r["without_key"], "read_cpu_ms"), _med(r["with_key"], "read_cpu_ms"),
         r["ratio_read_cpu"], _med(r, "inside_check_ms_per_run")]
        for r in rows
    ]  # fmt: skip
    return _table("10. The store key on SQLite (median CPU ms)", header, out)


RENDER = {
    "step_time": step_time,
    "run_length": run_length,
    "tokens": tokens,
    "storage": storage,
    "concurrency": concurrency,
    "resume": resume,
    "cli_start": cli_start,
    "prefix_cache": prefix_cache,
    "tracing": tracing,
    "fleet": fleet,
    "store_key": store_key,
}


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    load = m["load_average_at_start"]
    parts = [f"machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, load {load}"]
    parts += [RENDER[name](results[name]) for name in RENDER if name in results]
    return "\n\n".join(parts)
