"""``jupyter ci``: jupyter-ci's command line (a Jupyter subcommand through ``jupyter-ci``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from jupyter_core.application import JupyterApp
from traitlets import Bool, Int, Unicode

from ._version import __version__
from .config import JupyterCI
from .errors import JupyterCIError
from .options import OPTIONS
from .settings import resolve_settings

if TYPE_CHECKING:
    from .bench.paired import Pairing
    from .bench.tasks import Task


def _option_aliases() -> dict[str, str]:
    """``--max-attempts 2`` → ``JupyterCI.max_attempts``: CLI flags from the options table."""
    return {opt.flag[2:]: f"JupyterCI.{opt.name}" for opt in OPTIONS if opt.kind is not bool}


def _option_flags() -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for opt in OPTIONS:
        if opt.kind is bool:
            name = opt.flag[2:]
            flags[name] = ({"JupyterCI": {opt.name: True}}, f"Set {opt.name} to true.")
            flags["no-" + name] = ({"JupyterCI": {opt.name: False}}, f"Set {opt.name} to false.")
    flags["review"] = ({"JupyterCI": {"mode": "review"}}, "Same as --mode review.")
    flags["no-run"] = ({"JupyterCI": {"mode": "insert"}}, "Same as --mode insert.")
    return flags


class ConfigApp(JupyterApp):
    """``jupyter ci config``: print the settings jupyter-ci resolves here (never keys)."""

    name = "jupyter-ci-config"
    description = (
        "Show the settings jupyter-ci resolves from configuration files, flags and the environment."
    )
    version = __version__
    classes = [JupyterCI]
    aliases = _option_aliases()
    flags = {**JupyterApp.flags, **_option_flags()}
    # The server's configuration files are where c.JupyterCI.* usually lives.
    config_file_name = "jupyter_server_config"

    def start(self) -> None:
        """Resolve and print."""
        from .magics import describe

        try:
            settings = resolve_settings(JupyterCI(parent=self).as_layers())
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            self.exit(2)
        print(describe(settings))


def _one_terminal() -> bool:
    """Whether stdout and stderr are the same terminal (what one prints, the other showed)."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):  # not a real file (a captured stream)
        return False
    return sys.stdout.isatty() and os.path.samestat(out, err)


class ProgressPrinter:
    """Turns run events into short progress lines on a stream (stderr), for people watching."""

    def __init__(self, stream: TextIO, max_attempts: int) -> None:
        self.stream = stream
        self.max_attempts = max_attempts
        self.cell_numbers: dict[str, int] = {}
        self.live = stream.isatty()
        #: How many notices were printed (the run's own; later ones are printed by the caller).
        self.notices = 0
        #: The model's last prose printed (the run's answer, at its end).
        self.said = ""
        self._dots = 0

    def __call__(self, event: dict[str, Any]) -> None:
        """Print what ``event`` means, if anything."""
        kind = event["type"]
        line = ""
        if kind == "token":
            if self.live:
                self._dots += 1
                if self._dots % 20 == 0:
                    self.stream.write(".")
                    self.stream.flush()
            return
        if kind == "cell_inserted":
            number = self.cell_numbers.setdefault(event["cell_id"], len(self.cell_numbers) + 1)
            line = f"cell {number} inserted"
        elif kind == "attempt":
            number = self.cell_numbers.get(event["cell_id"], 0)
            line = f"running cell {number} (attempt {event['attempt']}/{event['max_attempts']})"
        elif kind == "execution_finished":
            status = event["status"]
            from .agent.digest import error_line  # loaded with the run already

            said = error_line(event["digest"]) if status != "ok" else ""
            detail = f": {said[:120]}" if said else ""
            duration = event["duration"]
            took = f" in {duration:.1f} s" if duration is not None else ""
            line = f"  {status}{took}{detail}"
        elif kind == "cell_updated" and event["cause"] == "fix" and event["attempt"] > 1:
            line = f"  fix received (attempt {event['attempt']}/{self.max_attempts})"
        elif kind == "message":
            self.notices += event["role"] == "notice"
            if event["role"] == "assistant":
                self.said = event["text"].strip()
            line = ("notice: " if event["role"] == "notice" else "") + event["text"]
        elif kind == "state" and event["state"] in ("generating", "fixing"):
            line = f"{event['state']}…"
        if line:
            if self._dots:
                self.stream.write("\n")
                self._dots = 0
            self.stream.write(line + "\n")
            self.stream.flush()


class RunApp(JupyterApp):
    """``jupyter ci run NOTEBOOK "request"``: generate and run cells in a notebook file."""

    name = "jupyter-ci-run"
    description = (
        "Run a request against a notebook file, headless: a kernel is started for it, generated "
        "cells are appended after the last cell with their outputs, and the file is written "
        "atomically. Exit codes: 0 done, 1 the task failed within its caps, 2 usage or "
        "configuration error."
    )
    examples = 'jupyter ci run analysis.ipynb "plot the iris data" --model openai/gpt-4o-mini'
    version = __version__
    classes = [JupyterCI]
    aliases = {**_option_aliases(), "kernel": "RunApp.kernel_name"}
    flags = {
        **JupyterApp.flags,
        **_option_flags(),
        "restore": ({"RunApp": {"restore": True}}, "Re-run the notebook's code cells first."),
    }
    config_file_name = "jupyter_server_config"
    restore = Bool(False, help="Re-run the notebook's code cells first.").tag(config=True)
    kernel_name = Unicode("", help="Kernel to use instead of the notebook's own.").tag(config=True)

    def start(self) -> None:
        """Run and exit with the outcome's code."""
        self.exit(self.run())

    def run(self) -> int:
        """Do the run; return the exit code."""
        from .api import run_notebook
        from .errors import BadNotebookFile, ConfigError

        if len(self.extra_args) != 2:
            print('usage: jupyter ci run NOTEBOOK "request" [options]', file=sys.stderr)
            return 2
        path, prompt = self.extra_args
        if not prompt.strip():
            print("jupyter-ci: the request is empty.", file=sys.stderr)
            return 2
        try:
            settings = resolve_settings(JupyterCI(parent=self).as_layers())
            if not settings.model:
                raise ConfigError.no_model("cli")
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            return 2
        printer = ProgressPrinter(sys.stderr, settings.max_attempts)
        try:
            outcome = run_notebook(
                path,
                prompt,
                settings=settings,
                restore=self.restore,
                on_event=printer,
                kernel_name=self.kernel_name or None,
            )
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            return 2 if isinstance(err, (ConfigError, BadNotebookFile)) else 1
        for note in outcome.notices[printer.notices :]:
            print(f"jupyter-ci: {note}", file=sys.stderr)
        if outcome.answer and not (outcome.answer.strip() == printer.said and _one_terminal()):
            print(outcome.answer)  # on stdout, for a pipe; not twice on the screen
        if outcome.error is not None:
            print(f"jupyter-ci: {outcome.error}", file=sys.stderr)
        print(outcome.status_line(), file=sys.stderr)
        if outcome.ok:
            return 0
        return 2 if outcome.reason == "config_error" else 1


class BenchApp(JupyterApp):
    """``jupyter ci bench TASKS``: measure the agent on questions with checkable answers."""

    name = "jupyter-ci-bench"
    description = (
        "Run the agent on data-analysis questions with checkable answers and report accuracy, "
        "attempts, tokens, time and failures. TASKS is a DABench-format directory "
        "(questions.jsonl, labels.jsonl, tables/) or `builtin` (jupyter-ci's own suite). Each "
        "task runs in a fresh temporary directory, notebook and kernel; results go to "
        "DIR/results.jsonl (a JSON line per task), DIR/notebooks/ and DIR/summary.json. "
        "Exit codes: 0 the bench completed (whatever the accuracy), 2 usage or configuration "
        "error, 130 interrupted (continue with --resume --out DIR)."
    )
    examples = (
        "jupyter ci bench builtin --model openai/qwen --api-base http://127.0.0.1:8080/v1\n"
        "jupyter ci bench ../shared/data/dabench-dev --limit 40 --sample-seed 1 --out runs/a\n"
        "jupyter ci bench ../shared/data/dabench-dev --out runs/a --resume\n"
        "jupyter ci bench ../shared/data/dabench-dev --out runs/b --paired-with runs/a "
        "--fix-temperatures 0.6,0.9"
    )
    version = __version__
    classes = [JupyterCI]
    aliases = {
        **_option_aliases(),
        "limit": "BenchApp.limit",
        "sample-seed": "BenchApp.sample_seed",
        "out": "BenchApp.out",
        "paired-with": "BenchApp.paired_with",
        "jobs": "BenchApp.jobs",
    }
    flags = {
        **JupyterApp.flags,
        **_option_flags(),
        "resume": (
            {"BenchApp": {"resume": True}},
            "Skip the tasks already in DIR/results.jsonl (needs --out).",
        ),
    }
    config_file_name = "jupyter_server_config"
    limit = Int(0, help="Run at most this many tasks (0: all).").tag(config=True)
    sample_seed = Int(
        None,
        allow_none=True,
        help="Pick a random sample of --limit tasks with this seed (without it: the first ones).",
    ).tag(config=True)
    out = Unicode("", help="Results directory (default: a new bench-results/<UTC time> here).").tag(
        config=True
    )
    resume = Bool(False, help="Skip the tasks already in DIR/results.jsonl.").tag(config=True)
    paired_with = Unicode(
        "",
        help="A paired arm: re-run only the tasks of this earlier --out directory where a cell "
        "failed or a result looked suspicious, and carry the others' records over (valid only "
        "for options that act after a failure; others are refused).",
    ).tag(config=True)
    jobs = Int(1, help="Tasks run at once, each with its own kernel and directory.").tag(
        config=True
    )

    def start(self) -> None:
        """Run the bench and exit with its code."""
        self.exit(self.run())

    def run(self) -> int:
        """Do the bench; return the exit code."""
        import asyncio
        import json
        import time

        from .api import closing_clients
        from .bench.paired import fingerprint
        from .bench.report import render_report, summarize
        from .bench.runner import ProgressLine, run_bench, run_task
        from .bench.suite import build_suite
        from .bench.tasks import TaskError, load_tasks, select_tasks
        from .errors import ConfigError
        from .models.litellm_model import import_litellm

        if len(self.extra_args) != 1:
            print("usage: jupyter ci bench TASKS|builtin [options]", file=sys.stderr)
            return 2
        if self.limit < 0:
            print("jupyter-ci: --limit must be at least 0.", file=sys.stderr)
            return 2
        if self.resume and not self.out:
            print("jupyter-ci: --resume needs --out DIR (the run to continue).", file=sys.stderr)
            return 2
        if self.jobs < 1:
            print("jupyter-ci: --jobs must be at least 1.", file=sys.stderr)
            return 2
        try:
            settings = resolve_settings(JupyterCI(parent=self).as_layers())
            if not settings.model:
                raise ConfigError.no_model("cli")
            if settings.mode != "auto":
                raise ConfigError(
                    f"The bench runs cells without review; mode {settings.mode!r} cannot work.",
                    hint="Use --mode auto.",
                    option="mode",
                )
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            return 2
        out = Path(
            self.out or Path("bench-results") / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        )
        results = out / "results.jsonl"
        if results.is_file() and results.stat().st_size and not self.resume:
            print(
                f"jupyter-ci: {results} already holds results; add --resume to continue that run "
                "or choose another --out.",
                file=sys.stderr,
            )
            return 2
        source = self.extra_args[0]
        try:
            directory = build_suite(out / "suite") if source == "builtin" else Path(source)
            tasks = load_tasks(directory)
        except (TaskError, OSError) as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            return 2
        chosen = select_tasks(tasks, self.limit or None, self.sample_seed)
        config: dict[str, Any] = {
            "tasks": "builtin" if source == "builtin" else str(directory.absolute()),
            "limit": self.limit or None,
            "sample_seed": self.sample_seed,
            "task_ids": [task.id for task in chosen],
            "settings": settings.public_dict(),
            "fingerprint": fingerprint(),
        }
        pairing: Pairing | None = None
        warnings: list[str] = []
        if self.paired_with:
            try:
                pairing, warnings = self._pairing(Path(self.paired_with), out, config, chosen)
            except ValueError as err:
                print(f"jupyter-ci: {err}", file=sys.stderr)
                return 2
            config["paired_with"] = pairing.summary(warnings)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        print(f"jupyter-ci: bench of {len(chosen)} tasks into {out}", file=sys.stderr)
        if pairing is not None:
            pairing.carry_notebooks(out)
            print(
                f"jupyter-ci: paired with {pairing.base}: {len(pairing.reasons)} tasks to run, "
                f"{len(pairing.carried)} carried over",
                file=sys.stderr,
            )
        progress = ProgressLine(sys.stderr, len(chosen))
        try:
            records = asyncio.run(
                closing_clients(
                    run_bench(
                        chosen,
                        settings,
                        out,
                        resume=self.resume,
                        progress=progress,
                        warm_up=import_litellm,
                        jobs=self.jobs,
                        runner=pairing.runner(run_task) if pairing is not None else None,
                        carried=pairing.carried if pairing is not None else None,
                    )
                )
            )
        except KeyboardInterrupt:
            print(f"\njupyter-ci: interrupted; continue with --resume --out {out}", file=sys.stderr)
            return 130
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            return 2
        summary = summarize(records)
        if pairing is not None:
            summary["paired"] = pairing.summary(warnings, records)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(render_report(summary))
        print(
            f"results: {results}; notebooks: {out / 'notebooks'}; summary: {out / 'summary.json'}"
        )
        return 0

    def _pairing(
        self, base: Path, out: Path, config: dict[str, Any], chosen: list[Task]
    ) -> tuple[Pairing, list[str]]:
        """The paired arm against ``base``; ``ValueError`` when it would not be valid."""
        from .bench.paired import Pairing, pairing_problems

        if base.absolute() == out.absolute():
            raise ValueError("--paired-with names the --out directory itself: give another --out.")
        base_config = Pairing.load_config(base)
        errors, warnings = pairing_problems(base_config, config)
        if errors:
            raise ValueError(
                "a paired arm against "
                + str(base)
                + " would not be valid: "
                + "; ".join(errors)
                + ". Run a full arm (without --paired-with) to measure this."
            )
        for warning in warnings:
            print(f"jupyter-ci: warning: {warning}", file=sys.stderr)
        return Pairing(base, chosen), warnings


class McpApp(JupyterApp):
    """``jupyter ci mcp``: jupyter-ci's MCP tools over stdio, for agents that speak stdio."""

    name = "jupyter-ci-mcp"
    description = (
        "Serve jupyter-ci's MCP tools (execute, run_cell, read_notebook, ...) over stdio. With a "
        "running Jupyter server that serves this folder (as `jupyter server list` finds them, or "
        "--url and --token), relay to its jupyter-ci: cells then appear and run in the JupyterLab "
        "tab that has their notebook open. With none, work headless on the notebook files under "
        "--root (default: this folder) with kernels of its own. Logs go to stderr."
    )
    examples = (
        "claude mcp add jupyter -- jupyter ci mcp\n"
        "jupyter ci mcp --url http://127.0.0.1:8888/ --token $JUPYTER_TOKEN\n"
        "jupyter ci mcp --headless --root ~/analysis"
    )
    version = __version__
    classes = [JupyterCI]
    aliases = {
        **_option_aliases(),
        "url": "McpApp.url",
        "token": "McpApp.token",
        "root": "McpApp.root",
    }
    flags = {
        **JupyterApp.flags,
        **_option_flags(),
        "headless": (
            {"McpApp": {"headless": True}},
            "Do not look for a running server: work on the files with kernels of its own.",
        ),
    }
    config_file_name = "jupyter_server_config"
    url = Unicode("", help="The Jupyter server to relay to (its URL with its base URL).").tag(
        config=True
    )
    token = Unicode(
        "", help="That server's token (default: $JUPYTER_TOKEN, or the one found with it)."
    ).tag(config=True)
    root = Unicode("", help="The folder of the notebooks (default: the current folder).").tag(
        config=True
    )
    headless = Bool(False, help="Work on the files with kernels of its own.").tag(config=True)

    def start(self) -> None:
        """Serve until the client closes stdin."""
        self.exit(self.run())

    def run(self) -> int:
        """Relay or serve; return the exit code."""
        import asyncio
        import os

        from .mcp.stdio import check_server, find_server, relay, serve_local

        root = os.path.abspath(self.root or os.getcwd())
        if not os.path.isdir(root):
            print(f"jupyter-ci: --root {root} is not a folder.", file=sys.stderr)
            return 2
        url, token = self.url, self.token or os.environ.get("JUPYTER_TOKEN", "")
        if not url and not self.headless:
            found = find_server(root)
            if found is not None:
                url, token = str(found["url"]), self.token or str(found.get("token") or "")

        async def main() -> int:
            if url:
                problem = await check_server(url, token)
                if problem is None:
                    print(f"jupyter-ci mcp: relaying to {url}", file=sys.stderr)
                    await relay(url, token)
                    return 0
                if self.url:
                    print(f"jupyter-ci: {problem}.", file=sys.stderr)
                    return 2
                print(f"jupyter-ci mcp: {problem}; working headless instead.", file=sys.stderr)
            print(f"jupyter-ci mcp: headless on {root}", file=sys.stderr)
            await serve_local(root, JupyterCI(parent=self))
            return 0

        try:
            return asyncio.run(main())
        except KeyboardInterrupt:
            return 130


class JupyterCIApp(JupyterApp):
    """``jupyter ci``: jupyter-ci's command line."""

    name = "jupyter-ci"
    description = (
        "jupyter-ci turns a request in plain language into notebook cells run in a real kernel.\n"
        "In JupyterLab use the jupyter-ci panel or `%load_ext jupyter_ci` then `%%ci <request>`."
    )
    version = __version__
    classes = [JupyterCI]
    subcommands = {
        "config": (ConfigApp, ConfigApp.description),
        "run": (RunApp, RunApp.description),
        "bench": (BenchApp, BenchApp.description),
        "mcp": (McpApp, McpApp.description),
    }

    def start(self) -> None:
        """Without a subcommand, say what there is."""
        if self.subapp is not None:
            self.subapp.start()
            return
        self.print_help()
        print("Subcommands: " + ", ".join(sorted(self.subcommands)) + " (jupyter ci <cmd> --help)")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``jupyter-ci`` script."""
    JupyterCIApp.launch_instance(argv=argv)


if __name__ == "__main__":
    main()
