"""What ``%load_ext jupyter_ci`` costs: median over fresh processes, against a baseline.

Each sample is a fresh Python process that builds an IPython ``InteractiveShell`` and then times
``%load_ext jupyter_ci`` (the baseline: the same process timing ``%load_ext`` of an empty
extension module). Also lists heavy modules the load added (there must be none).

    python -m benchmarks.load_ext [--samples 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = r"""
import json, sys, time
sys.path.insert(0, {tmp!r})
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
heavy = ("litellm", "openai", "tornado", "jupyter_server", "httpx", "jsonschema")
t0 = time.perf_counter(); ip.run_line_magic("load_ext", "empty_ext"); t1 = time.perf_counter()
before = set(sys.modules)
t2 = time.perf_counter(); ip.run_line_magic("load_ext", "jupyter_ci"); t3 = time.perf_counter()
added = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in heavy)
added_count = len(set(sys.modules) - before)
result = {{"baseline": t1 - t0, "load": t3 - t2, "modules": added_count, "heavy": added}}
print(json.dumps(result))
"""


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "empty_ext.py").write_text(
            "def load_ext(ip):\n    pass\n\nload_ipython_extension = load_ext\n"
        )
        results = []
        for _ in range(args.samples):
            out = subprocess.run(
                [sys.executable, "-c", PROBE.format(tmp=tmp)],
                capture_output=True,
                text=True,
                check=True,
            )
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    load = statistics.median(r["load"] for r in results) * 1000
    base = statistics.median(r["baseline"] for r in results) * 1000
    heavy = sorted({m for r in results for m in r["heavy"]})
    print(f"%load_ext jupyter_ci: median {load:.1f} ms over {args.samples} fresh processes")
    print(f"baseline (%load_ext of an empty module): median {base:.2f} ms")
    print(f"ratio: {load / base:.0f}x the empty extension; modules added: {results[0]['modules']}")
    print("heavy modules imported: " + (", ".join(heavy) if heavy else "none"))


if __name__ == "__main__":
    main()
