"""Variable inspection: the expression in a real kernel, its caps, and the parser."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from jupyter_ci.agent.variables import INSPECT_SOURCE, inspection_expression, parse_variables
from jupyter_ci.agent.workspace import Variable

pytest.importorskip("numpy")
pytest.importorskip("pandas")

SETUP = """\
import numpy as np
import pandas as pd
from math import sqrt

n = 42
ratio = 0.5
flag = True
name = 'iris'
long_text = 'x' * 500
items = [1, 2, 3]
config = {'a': 1, 'b': 2}
arr = np.arange(12).reshape(3, 4)
df = pd.DataFrame({'sepal': [1.0, 2.0], 'species': ['a', 'b']})
_private = 1

class Trap:
    calls = []
    def __len__(self):
        Trap.calls.append('len'); return 1
    def __repr__(self):
        Trap.calls.append('repr'); return 'Trap()'
    def __str__(self):
        Trap.calls.append('str'); return 'Trap()'
    def __bool__(self):
        Trap.calls.append('bool'); return True
    def __getattr__(self, attr):
        Trap.calls.append('getattr ' + attr); raise AttributeError(attr)
    @property
    def __class__(self):
        Trap.calls.append('__class__'); return Trap

trap = Trap()

def helper(a, b=trap, *rest, key=None, **options):
    return a
"""

STATE = "print(sorted(k for k in globals() if not k.startswith('_')), len(In), len(Out))"


def execute(kc: BlockingKernelClient, code: str, **options: Any) -> tuple[dict[str, Any], str]:
    """Run ``code``; return the reply's content and the stdout text."""
    msg_id = kc.execute(code, allow_stdin=False, stop_on_error=False, **options)
    stdout = ""
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            stdout += msg["content"]["text"]
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], stdout


def evaluate(kc: BlockingKernelClient, expression: str) -> str:
    """The text/plain value of ``expression`` from a silent, empty execute request."""
    content, _ = execute(
        kc, "", silent=True, store_history=False, user_expressions={"x": expression}
    )
    result = content["user_expressions"]["x"]
    assert result["status"] == "ok", result
    return str(result["data"]["text/plain"])


@pytest.fixture(scope="module")
def kernel() -> Iterator[BlockingKernelClient]:
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_inspection_in_a_real_kernel_lists_and_leaves_no_trace(
    kernel: BlockingKernelClient,
) -> None:
    setup, _ = execute(kernel, SETUP)
    assert setup["status"] == "ok", setup
    before, state_before = execute(kernel, STATE)
    all_names = "sorted(get_ipython().user_ns)"
    names_before = evaluate(kernel, all_names)

    text = evaluate(kernel, inspection_expression())

    assert evaluate(kernel, all_names) == names_before  # nothing added, nothing deleted
    after, state_after = execute(kernel, STATE)
    # The inspection used no execution number and added nothing to In or Out.
    assert after["execution_count"] == before["execution_count"] + 1
    public, in_before, out_before = _state(state_before)
    public_after, in_after, out_after = _state(state_after)
    assert public_after == public
    assert (in_after, out_after) == (in_before + 1, out_before)
    _, calls = execute(kernel, "print(Trap.calls)")
    assert calls.strip() == "[]"  # no len/repr/str/bool/getattr/__class__ on the unknown object

    variables = {v.name: v for v in parse_variables(text)}
    assert list(variables) == [
        "helper",
        "trap",
        "Trap",
        "df",
        "arr",
        "config",
        "items",
        "long_text",
        "name",
        "flag",
        "ratio",
        "n",
    ]  # most recent first; no _private, In, Out, modules or imported functions
    assert variables["n"] == Variable("n", "int", "42")
    assert variables["ratio"] == Variable("ratio", "float", "0.5")
    assert variables["flag"] == Variable("flag", "bool", "True")
    assert variables["name"] == Variable("name", "str", "'iris'")
    assert variables["long_text"].summary.endswith("... (500 chars)")
    assert len(variables["long_text"].summary) <= 200
    assert variables["items"] == Variable("items", "list", "len 3")
    assert variables["config"] == Variable("config", "dict", "len 2, keys 'a', 'b'")
    assert variables["arr"] == Variable("arr", "numpy.ndarray", "dtype int64", shape=(3, 4))
    frame = variables["df"]
    assert frame.type == "pandas.DataFrame"
    assert frame.shape == (2, 2)
    assert frame.columns == ["sepal", "species"]
    assert frame.dtypes is not None
    assert frame.dtypes[0] == "float64"
    assert len(frame.dtypes) == 2
    assert variables["trap"] == Variable("trap", "Trap")  # unknown type: its name only
    assert variables["Trap"] == Variable("Trap", "type", "class Trap")
    assert variables["helper"] == Variable(
        "helper", "function", "def helper(a, b, *rest, key, **options)"
    )


def test_kernel_output_is_exactly_the_json(kernel: BlockingKernelClient) -> None:
    text = evaluate(kernel, inspection_expression())
    data = json.loads(text)
    assert data["version"] == 1
    assert isinstance(data["variables"], list)


def _state(stdout: str) -> tuple[list[str], int, int]:
    head, in_length, out_length = stdout.strip().rsplit(" ", 2)
    return ast.literal_eval(head), int(in_length), int(out_length)


# --- the source's caps and failure handling, in this process -------------------------------


def run_source(namespace: dict[Any, Any]) -> dict[str, Any]:
    scope: dict[str, Any] = {"ns": namespace}
    exec(INSPECT_SOURCE, scope)  # noqa: S102 - our own source, as the kernel runs it
    return dict(json.loads(repr(scope["result"])))


def test_expression_works_with_plain_eval_and_leaves_the_namespace_alone() -> None:
    namespace: dict[str, Any] = {"__builtins__": __builtins__, "a": 1, "_b": 2}
    result = eval(inspection_expression(), namespace, namespace)  # noqa: S307
    assert parse_variables(repr(result)) == [Variable("a", "int", "1")]
    assert sorted(namespace) == ["__builtins__", "_b", "a"]


def test_at_most_100_variables_and_20_kb() -> None:
    many = run_source({f"v{i}": i for i in range(150)})
    assert len(many["variables"]) == 100
    assert many["omitted"] == 50
    assert many["variables"][0]["name"] == "v149"  # the most recent first

    keys = {f"key{k}" * 20: k for k in range(10)}
    long = run_source({f"d{i}": keys for i in range(100)})
    assert len(json.dumps(long)) <= 21_000
    assert long["omitted"] > 0
    assert all(len(v["summary"]) <= 200 for v in long["variables"])


def test_a_failing_attribute_of_a_known_library_type_is_reported_not_raised() -> None:
    class Broken:
        @property
        def shape(self) -> tuple[int, ...]:
            raise RuntimeError("no shape today")

    Broken.__module__ = "numpy.fake"
    Broken.__qualname__ = "Broken"
    result = run_source({"ok": 1, "bad": Broken()})
    assert result["variables"][0] == {
        "name": "bad",
        "type": "numpy.fake.Broken",
        "summary": "error while summarising: RuntimeError",
    }
    assert result["variables"][1] == {"name": "ok", "type": "int", "summary": "1"}


def test_big_ints_and_odd_keys_stay_cheap() -> None:
    namespace: dict[Any, Any] = {"big": 10**5000, "mixed": {(1, 2): "x"}, 3: "not a name"}
    result = run_source(namespace)
    variables = {v["name"]: v for v in result["variables"]}
    assert variables["big"]["summary"] == f"an int of {(10**5000).bit_length()} bits"
    assert variables["mixed"]["summary"] == "len 1"
    assert len(variables) == 2


# --- the parser -----------------------------------------------------------------------------


def test_parse_reads_every_field() -> None:
    text = json.dumps(
        {
            "version": 1,
            "variables": [
                {
                    "name": "df",
                    "type": "pandas.DataFrame",
                    "shape": [150, 5],
                    "columns": ["a", "b"],
                    "dtypes": ["float64", "object"],
                },
                {"name": "x", "type": "int", "summary": "3"},
            ],
            "omitted": 0,
        }
    )
    assert parse_variables(text) == [
        Variable(
            "df",
            "pandas.DataFrame",
            shape=(150, 5),
            columns=["a", "b"],
            dtypes=["float64", "object"],
        ),
        Variable("x", "int", "3"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Traceback (most recent call last): ...", "did not return JSON"),
        ("[]", "without a 'variables' list"),
        ('{"variables": {}}', "without a 'variables' list"),
        ('{"variables": [1]}', "variable #0 is not an object"),
        ('{"variables": [{"name": 1, "type": "int"}]}', "lacks a string 'name'"),
        ('{"variables": [{"name": "x", "type": "int", "summary": 3}]}', "'summary' is not"),
        ('{"variables": [{"name": "x", "type": "t", "shape": [1.5]}]}', "'shape' is not a list"),
        ('{"variables": [{"name": "x", "type": "t", "shape": [true]}]}', "'shape' is not a list"),
        ('{"variables": [{"name": "x", "type": "t", "columns": [1]}]}', "'columns' is not"),
    ],
)
def test_parse_refuses_garbage(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_variables(text)
