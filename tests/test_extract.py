"""Code extraction from canned model replies, the tool-call path, and the syntax check."""

from __future__ import annotations

import json

import pytest

from jupyter_ci.agent.extract import (
    Extraction,
    check_syntax,
    code_from_tool_arguments,
    extract_code,
    looks_like_code,
)
from jupyter_ci.errors import BadCodeBlock

# --- fenced blocks -----------------------------------------------------------------------------


def test_python_block_with_prose_around_it() -> None:
    reply = (
        "I'll load the data first.\n\n"
        "```python\n"
        "import pandas as pd\n"
        "df = pd.read_csv('iris.csv')\n"
        "df.head()\n"
        "```\n\n"
        "This shows the first rows.  \n"
    )
    assert extract_code(reply) == Extraction(
        "import pandas as pd\ndf = pd.read_csv('iris.csv')\ndf.head()",
        "I'll load the data first.\n\nThis shows the first rows.",
        (),
    )


@pytest.mark.parametrize(
    "tag",
    ["py", "ipython", "Python3", "{python}", "{.python}", "python title='x.py'", "python:a.py"],
)
def test_other_python_tags(tag: str) -> None:
    assert extract_code(f"```{tag}\nx = 1\n```") == Extraction("x = 1", "", ())


def test_windows_line_endings() -> None:
    reply = "Here:\r\n```python\r\nx = 1\r\ny = 2\r\n```\r\n"
    assert extract_code(reply) == Extraction("x = 1\ny = 2", "Here:", ())


def test_tilde_fence() -> None:
    assert extract_code("~~~python\nx = 1\n~~~\n") == Extraction("x = 1", "", ())


def test_block_without_a_language_tag() -> None:
    assert extract_code("Here:\n```\nprint('hi')\n```") == Extraction(
        "print('hi')", "Here:", ("no_language_tag",)
    )


def test_two_blocks_are_joined_in_order() -> None:
    reply = (
        "First, load:\n```python\nimport numpy as np\n```\n"
        "Then compute:\n```python\nnp.mean([1, 2, 3])\n```\nDone."
    )
    assert extract_code(reply) == Extraction(
        "import numpy as np\n\nnp.mean([1, 2, 3])",
        "First, load:\nThen compute:\nDone.",
        ("several_blocks",),
    )


def test_a_repeated_block_is_taken_once() -> None:
    reply = "```python\nx = 1\n```\nAgain:\n```python\nx = 1\n```"
    assert extract_code(reply) == Extraction("x = 1", "Again:", ("duplicate_block_dropped",))


def test_invented_output_block_with_an_output_tag_is_dropped() -> None:
    reply = (
        "```python\nprint(df.shape)\n```\n\n"
        "```output\n(150, 5)\n```\n\n"
        "The frame has 150 rows.\n\n"
        "```text\nsome text\n```"
    )
    assert extract_code(reply) == Extraction(
        "print(df.shape)", "The frame has 150 rows.", ("output_block_dropped",)
    )


def test_block_after_an_output_line_is_dropped_with_that_line() -> None:
    reply = (
        "```python\nprint(df.shape)\nprint(df.columns.tolist())\n```\n"
        "Output:\n"
        "```\n(150, 5)\n['sepal_length', 'sepal_width', 'species']\n```\n"
        "So there are five columns."
    )
    assert extract_code(reply) == Extraction(
        "print(df.shape)\nprint(df.columns.tolist())",
        "So there are five columns.",
        ("output_block_dropped",),
    )


@pytest.mark.parametrize(
    "intro", ["This will output:", "**Result:**", "Expected output:", "You should see:"]
)
def test_output_intro_lines(intro: str) -> None:
    reply = f"```python\nprint(1 + 1)\n```\n{intro}\n```python\n2\n```\n"
    assert extract_code(reply) == Extraction("print(1 + 1)", "", ("output_block_dropped",))


def test_output_looking_text_after_an_intro_is_dropped() -> None:
    table = "   sepal_length species\n0           5.1  setosa\n1           4.9  setosa"
    reply = f"```python\ndf.head(2)\n```\nThe result:\n```\n{table}\n```"
    assert extract_code(reply) == Extraction("df.head(2)", "", ("output_block_dropped",))


def test_code_after_an_output_intro_is_kept() -> None:
    reply = (
        "```python\nimport pandas as pd\n```\n"
        "Let's display the result:\n"
        "```python\ndf.describe()\n```"
    )
    assert extract_code(reply) == Extraction(
        "import pandas as pd\n\ndf.describe()", "Let's display the result:", ("several_blocks",)
    )


def test_an_intro_that_mentions_code_introduces_code() -> None:
    reply = "Here is the code that prints the result:\n```\n42\n```"
    assert extract_code(reply) == Extraction(
        "42", "Here is the code that prints the result:", ("no_language_tag",)
    )


def test_unclosed_final_fence_runs_to_the_end() -> None:
    reply = "Plotting now.\n```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
    assert extract_code(reply) == Extraction(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])", "Plotting now.", ("unclosed_fence",)
    )


def test_magics_and_shell_lines_are_kept() -> None:
    reply = (
        "```python\n"
        "%pip install seaborn\n"
        "!ls data\n"
        "files = !ls\n"
        "%matplotlib inline\n"
        "import seaborn as sns\n"
        "```"
    )
    assert extract_code(reply) == Extraction(
        "%pip install seaborn\n!ls data\nfiles = !ls\n%matplotlib inline\nimport seaborn as sns",
        "",
        (),
    )


def test_a_block_of_another_language_stays_in_the_prose() -> None:
    reply = "Run this in a terminal:\n```bash\npip install seaborn\n```"
    assert extract_code(reply) == Extraction(None, reply, ())


def test_an_indented_fence_in_a_list_is_dedented() -> None:
    reply = "1. Load it:\n\n    ```python\n    x = 1\n    if x:\n        print(x)\n    ```\n"
    assert extract_code(reply) == Extraction("x = 1\nif x:\n    print(x)", "1. Load it:", ())


def test_a_longer_fence_holds_a_shorter_one() -> None:
    reply = '````python\ndoc = """\n```\nnot a fence\n```\n"""\n````'
    assert extract_code(reply) == Extraction('doc = """\n```\nnot a fence\n```\n"""', "", ())


def test_an_empty_block_is_no_code() -> None:
    assert extract_code("Nothing to run.\n```python\n```") == Extraction(
        None, "Nothing to run.", ()
    )


def test_thinking_is_set_aside() -> None:
    reply = "<think>Maybe:\n```python\nx = 0\n```\nNo.</think>\nHere you go.\n```python\nx = 1\n```"
    assert extract_code(reply) == Extraction("x = 1", "Here you go.", ("thinking_removed",))


# --- JSON and textual tool calls ---------------------------------------------------------------


def test_reply_that_is_a_json_object() -> None:
    reply = json.dumps({"code": "import os\nprint(os.getcwd())\n"})
    assert extract_code(reply) == Extraction("import os\nprint(os.getcwd())", "", ("json_wrapped",))


def test_json_object_with_language_and_explanation() -> None:
    reply = json.dumps(
        {"language": "python", "explanation": "Counts rows.", "code": "len(df)"}, indent=2
    )
    assert extract_code(reply) == Extraction("len(df)", "Counts rows.", ("json_wrapped",))


def test_json_with_raw_newlines_in_the_string() -> None:
    reply = '{"code": "x = 1\nprint(x)"}'  # invalid strict JSON, as models write it
    assert extract_code(reply) == Extraction("x = 1\nprint(x)", "", ("json_wrapped",))


def test_json_in_a_json_fence() -> None:
    reply = 'Sure.\n```json\n{"language": "python", "code": "df.info()"}\n```'
    assert extract_code(reply) == Extraction("df.info()", "Sure.", ("json_wrapped",))


def test_json_in_an_untagged_fence() -> None:
    reply = '```\n{"code": "df.info()"}\n```'
    assert extract_code(reply) == Extraction("df.info()", "", ("json_wrapped",))


def test_json_of_another_language_is_not_code() -> None:
    reply = '{"language": "bash", "code": "ls"}'
    assert extract_code(reply) == Extraction(None, reply, ())
    fenced = '```json\n{"name": "iris", "rows": 150}\n```'
    assert extract_code(fenced) == Extraction(None, fenced, ())


def test_tool_call_written_as_text() -> None:
    call = {"name": "run_python", "arguments": {"code": "print(2 + 2)"}}
    reply = f"I'll run it.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    assert extract_code(reply) == Extraction("print(2 + 2)", "I'll run it.", ("tool_call",))


def test_tool_call_json_with_string_arguments_in_a_fence() -> None:
    call = {"type": "function", "function": {"name": "run", "arguments": '{"code": "x = 3"}'}}
    reply = f"```json\n{json.dumps(call)}\n```"
    assert extract_code(reply) == Extraction("x = 3", "", ("tool_call",))


def test_unclosed_textual_tool_call() -> None:
    reply = '<tool_call>{"name": "run", "parameters": {"code": "y = 2"}}'
    assert extract_code(reply) == Extraction("y = 2", "", ("tool_call",))


# --- no fences ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "The data has 150 rows.",
        "Done",
        "42",
        "(150, 5)",
        "yes, sure",
        "not done",
        "well-known",
        "Note: done",
        "Summary: 3 rows",
        "global warming",
        "pass",
        "",
        "I could not find a column named 'price'. Which column holds the prices?",
    ],
)
def test_prose_is_not_code(reply: str) -> None:
    assert extract_code(reply) == Extraction(None, reply, ())


def test_bare_code_without_fences() -> None:
    reply = "import pandas as pd\ndf = pd.read_csv('iris.csv')\nprint(df.shape)\n"
    assert extract_code(reply) == Extraction(
        "import pandas as pd\ndf = pd.read_csv('iris.csv')\nprint(df.shape)", "", ("bare_code",)
    )


def test_bare_call_and_bare_magic_are_code() -> None:
    assert extract_code("df.head()") == Extraction("df.head()", "", ("bare_code",))
    assert extract_code("%pip install seaborn\n") == Extraction(
        "%pip install seaborn", "", ("bare_code",)
    )


def test_prose_around_unfenced_code_is_not_taken() -> None:
    reply = "Run this:\nx = 1"
    assert extract_code(reply) == Extraction(None, reply, ())


def test_prose_whitespace_is_tidied() -> None:
    reply = "\n\nFirst line.   \n\n\n\nSecond line.\n\n"
    assert extract_code(reply) == Extraction(None, "First line.\n\nSecond line.", ())


# --- the tool-call path ------------------------------------------------------------------------


def test_tool_arguments() -> None:
    assert code_from_tool_arguments('{"code": "print(1)\\n"}') == "print(1)"


def test_tool_arguments_encoded_twice() -> None:
    assert code_from_tool_arguments(json.dumps(json.dumps({"code": "x = 1"}))) == "x = 1"


def test_tool_arguments_with_a_fenced_code_string() -> None:
    arguments = json.dumps({"code": "```python\nx = 1\n```"})
    assert code_from_tool_arguments(arguments) == "x = 1"


def test_tool_arguments_with_raw_newlines() -> None:
    assert code_from_tool_arguments('{"code": "a = 1\nb = 2"}') == "a = 1\nb = 2"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("", 'The tool call had no arguments; expected {"code": "..."}.'),
        (
            '{"code": "print(1)',
            "The tool call's arguments are not valid JSON (Unterminated string starting at at "
            'line 1 column 10); expected {"code": "..."}.',
        ),
        (
            "[1, 2]",
            'The tool call\'s arguments are a JSON list, not an object with a "code" field.',
        ),
        ('{"source": "x = 1"}', 'The tool call\'s arguments have no "code" field.'),
        ('{"code": 12}', 'The tool call\'s "code" field is not a string.'),
        ('{"code": "  \\n"}', 'The tool call\'s "code" field is empty.'),
    ],
)
def test_bad_tool_arguments(arguments: str, reason: str) -> None:
    with pytest.raises(BadCodeBlock) as caught:
        code_from_tool_arguments(arguments)
    assert caught.value.reason == reason
    assert caught.value.excerpt == arguments
    assert caught.value.feed_back


# --- syntax ------------------------------------------------------------------------------------


def test_check_syntax_accepts_valid_code_with_magics() -> None:
    code = "%pip install seaborn\n!ls\nfiles = !ls\nfor f in files:\n    !echo {f}\nx = 1 != 2"
    assert check_syntax(code) is None


def test_check_syntax_reports_errors_with_their_line() -> None:
    assert check_syntax("x = 1\ny = = 2") == "SyntaxError: invalid syntax (line 2)"
    assert check_syntax("print((1,") == "SyntaxError: '(' was never closed (line 1)"
    assert check_syntax("if x:\npass") == (
        "IndentationError: expected an indented block after 'if' statement on line 1 (line 2)"
    )


def test_check_syntax_and_cell_magics() -> None:
    assert check_syntax("%%time\nx = = 1") == "SyntaxError: invalid syntax (line 2)"
    assert check_syntax("%%bash\nfor f in *; do echo $f; done") is None


def test_check_syntax_ignores_warnings() -> None:
    assert check_syntax("import re\nre.compile('\\d+')") is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = 1", True),
        ("df.head()", True),
        ("!ls", True),
        ("%%bash\nls", True),
        ("(150, 5)", False),
        ("{'a': 1, 'b': [2, 3]}", False),
        ("hello", False),
        ("-0.5", False),
        ("a b c", False),
    ],
)
def test_looks_like_code(source: str, expected: bool) -> None:
    assert looks_like_code(source) is expected


def test_the_parsers_own_limits_are_not_reported_as_errors() -> None:
    assert check_syntax("1+" * 100_000 + "1") is None
    assert extract_code("word " * 200_000).code is None
