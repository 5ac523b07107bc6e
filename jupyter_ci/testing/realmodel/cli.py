"""The command line: ``python -m jupyter_ci.testing.realmodel`` build, fetch, serve, stop, status
or kernel (see :mod:`jupyter_ci.testing.realmodel`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .cache import CACHE_ENV, DEFAULT_CACHE, RealModelError, cache_dir
from .kernel import make_kernel
from .runtime import LLAMA_CPP_VERSION, build, is_built
from .server import DEFAULT_N_CTX, DEFAULT_N_THREADS, serve, server_status, stop
from .weights import DEFAULT_MODEL, WEIGHTS, fetch, is_fetched


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_ci.testing.realmodel",
        description=(
            "Build llama-cpp-python, fetch verified model weights and serve them on 127.0.0.1, "
            f"all cached in ${CACHE_ENV} (default {DEFAULT_CACHE})."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help=f"build llama-cpp-python[server]=={LLAMA_CPP_VERSION}")
    fetch_cmd = commands.add_parser("fetch", help="download, assemble and verify weights")
    fetch_cmd.add_argument(
        "names", nargs="*", help=f"default: {DEFAULT_MODEL}; known: {', '.join(WEIGHTS)}"
    )
    serve_cmd = commands.add_parser("serve", help="start a detached server; print its base URL")
    serve_cmd.add_argument("name", nargs="?", default=DEFAULT_MODEL, choices=list(WEIGHTS))
    serve_cmd.add_argument("--port", type=int, default=0, help="default: a free port")
    serve_cmd.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX)
    serve_cmd.add_argument("--n-threads", type=int, default=DEFAULT_N_THREADS)
    stop_cmd = commands.add_parser("stop", help="stop a server started with serve")
    stop_cmd.add_argument("names", nargs="*", help="default: every running one")
    commands.add_parser("status", help="what is built, fetched and running")
    commands.add_parser(
        "kernel", help="make a data-science kernel for the bench; print its JUPYTER_PATH"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code (0 ok, 1 failed, 2 usage)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            print(build())
        elif args.command == "fetch":
            for name in args.names or [DEFAULT_MODEL]:
                print(fetch(name))
        elif args.command == "serve":
            record = serve(args.name, port=args.port, n_ctx=args.n_ctx, n_threads=args.n_threads)
            print(record["base_url"])
            print(
                f"model {record['model']}, pid {record['pid']}, log {record['log']}",
                file=sys.stderr,
            )
        elif args.command == "stop":
            for name in args.names or list(WEIGHTS):
                if stop(name):
                    print(f"stopped {name}")
                elif args.names:
                    print(f"no server for {name} is running", file=sys.stderr)
        elif args.command == "kernel":
            print(make_kernel())
        else:
            print(_status_text())
    except RealModelError as err:
        print(f"realmodel: {err}", file=sys.stderr)
        return 1
    return 0


def _status_text() -> str:
    cache = cache_dir()
    lines = [f"cache: {cache}"]
    built = is_built(cache)
    lines.append(f"llama-cpp-python {LLAMA_CPP_VERSION}: {'built' if built else 'not built'}")
    for name in WEIGHTS:
        fetched = is_fetched(name, cache)
        record = server_status(name, cache)
        running = f", serving at {record['base_url']} (pid {record['pid']})" if record else ""
        lines.append(f"{name}: {'fetched' if fetched else 'not fetched'}{running}")
    return "\n".join(lines)
