"""Command line: serve a scripted model until Ctrl-C or SIGTERM.

    python -m jupyter_ci.testing --script script.json --port 8000 [--record requests.jsonl]

The first line printed on stdout is the base URL (``http://127.0.0.1:PORT/v1``), so a parent
process can read it; ``--port 0`` (the default) picks a free port. Without ``--script`` every
chat request gets the "no reply left" error. A script file looks like::

    {
      "models": ["scripted"],
      "replies": [
        {"code": "print(1)", "prose": "Here is the cell:"},
        {"match": "Traceback", "content": "Let me fix that.", "times": null},
        {"tool_calls": [{"name": "run_cell", "arguments": {"code": "1 + 1"}}]},
        {"content": "slow answer", "delay": 0.05},
        {"fault": {"kind": "rate_limit", "retry_after": 2}},
        {"content": "cut short", "fault": {"kind": "cut_stream", "after_chunks": 2}}
      ],
      "default": {"fault": "server_error"}
    }

(a bare JSON list of replies works too; see ``Reply.from_dict`` for every field).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from .script import Script, ScriptError
from .server import ScriptedModelServer


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m jupyter_ci.testing``."""
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_ci.testing",
        description="Serve a scripted OpenAI-compatible model for tests.",
    )
    parser.add_argument(
        "--script", help="JSON script file (a list of replies or {replies, default, models})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free port)")
    parser.add_argument("--record", help="append each request as a JSON line to this file")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until interrupted; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        script = Script.load(args.script) if args.script else Script()
    except (OSError, ScriptError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    # SIGINT too: a shell's background job starts with SIGINT ignored, so Python's own
    # KeyboardInterrupt handler would never be installed.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    server = ScriptedModelServer(
        script, host=args.host, port=args.port, record_path=args.record, verbose=args.verbose
    )
    try:
        server.start()
    except OSError as exc:
        _restore(previous)
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(server.base_url, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        _restore(previous)
    return 0


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
