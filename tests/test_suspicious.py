"""What looks wrong in a result that raised nothing: the rules, and what they leave alone."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_ci.agent.suspicious import (
    ANSWER_SYNTAX,
    Concern,
    answer_concerns,
    describe_concerns,
    format_reminder,
    may_be_right,
    output_concerns,
    placeholders,
    printed,
    unanswered,
)
from jupyter_ci.bench.runner import build_prompt
from jupyter_ci.bench.tasks import Task


def out(text: str, name: str = "stdout") -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def result(text: str, html: str | None = None) -> dict[str, Any]:
    data = {"text/plain": text}
    if html is not None:
        data["text/html"] = html
    return {"output_type": "execute_result", "data": data, "execution_count": 3, "metadata": {}}


def kinds(outputs: list[dict[str, Any]], request: str = "") -> list[tuple[str, str]]:
    return [(c.kind, c.evidence) for c in output_concerns(outputs, request)]


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ([out("mean close price: nan\n")], [("nan", "mean close price: nan")]),
        ([out("r = NaN\n")], [("nan", "r = NaN")]),
        ([result("nan")], [("nan", "nan")]),
        ([result("np.float64(nan)")], [("nan", "np.float64(nan)")]),
        ([result("<NA>")], [("nan", "<NA>")]),
        ([out("ratio: inf\n")], [("inf", "ratio: inf")]),
        ([out("Correlation = -inf\n")], [("inf", "Correlation = -inf")]),
        (
            [result("Empty DataFrame\nColumns: [a, b]\nIndex: []")],
            [("empty", "Empty DataFrame")],
        ),
        (
            [out("Series([], Name: fare, dtype: float64)\n")],
            [("empty", "Series([], Name: fare, dtype: float64)")],
        ),
        ([out("Error: 'Close' not found\n")], [("swallowed", "Error: 'Close' not found")]),
        (
            [out("An error occurred: division by zero\n")],
            [("swallowed", "An error occurred: division by zero")],
        ),
        (
            [out("Error while reading data.csv: bad line\n")],
            [("swallowed", "Error while reading data.csv: bad line")],
        ),
        ([out("KeyError: 'Close'\n", "stderr")], [("swallowed", "KeyError: 'Close'")]),
        ([out("pandas.errors.ParserError: x\n")], [("swallowed", "pandas.errors.ParserError: x")]),
        (
            [out("Traceback (most recent call last):\n  File ...\nValueError: x\n", "stderr")],
            [("swallowed", "Traceback (most recent call last):")],
        ),
        ([out("@mean_fare[nan]\n")], [("answer", "@mean_fare[nan]")]),
        ([out("@mean_fare[{mean:.2f}]\n")], [("answer", "@mean_fare[{mean:.2f}]")]),
        ([out("@mean_fare[]\n")], [("answer", "@mean_fare[]")]),
        ([out("@mean_fare[None]\n")], [("answer", "@mean_fare[None]")]),
        # (an answer's value ends at its first "]")
        ([out("@m[{df['fare'].mean():.2f}]\n")], [("answer", "@m[{df['fare']")]),
        ([out("@m[{x!r}]\n")], [("answer", "@m[{x!r}]")]),
        ([out("@m[{mean}]\n")], [("answer", "@m[{mean}]")]),
        # An answer that leaves items out, as pandas, NumPy or the placeholder write it.
        (
            [out("@months[{1: 7.3, 2: 6.9, ..., 12: 8.1}]\n")],
            [("cut", "@months[{1: 7.3, 2: 6.9, ..., 12: 8.1}]")],
        ),
        ([out("@v[[0.1 0.2 ... 0.9]]\n")], [("cut", "@v[[0.1 0.2 ... 0.9]")]),
        ([out("@names[Ann, …, Zoe]\n")], [("cut", "@names[Ann, …, Zoe]")]),
        ([out("@names[...]\n")], [("cut", "@names[...]")]),
    ],
)
def test_suspicious_results(outputs: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    assert kinds(outputs) == expected


@pytest.mark.parametrize(
    "outputs",
    [
        # Data that holds NaN is data, not a result.
        [out("   name  fare\n0   Ann   NaN\n1   Bob  39.3\n")],
        [result("a    NaN\nb    1.0\ndtype: float64")],
        [out("{'a': nan, 'b': 1.0}\n")],
        [result("   x\n0 NaN", html='<table class="dataframe"><tr><td>NaN</td></tr></table>')],
        # Words that merely contain "error", warnings, a right answer.
        [out("Mean Squared Error: 0.25\n")],
        [out("Error rate: 0.1\n")],
        [out("error_count = 3\n")],
        [out("/x.py:3: FutureWarning: the default will change\n", "stderr")],
        [out("@mean_fare[34.65]\n")],
        # A category named "none", and a dict, are values like any other.
        [out("@outliers[none]\n")],
        [out("@counts[{'a': 1, 'b': 2}]\n")],
        # Dots inside a word or a number are not items left out.
        [out("@status[loading...]\n")],
        [out("@ratio[0.333...]\n")],
        [out("infinite loop avoided; nancy: 3\n")],
        [out("(no output)")],
    ],
)
def test_what_is_left_alone(outputs: list[dict[str, Any]]) -> None:
    assert kinds(outputs) == []


@pytest.mark.parametrize(
    ("text", "evidence"),
    [
        ("The answer is @Switzerland[Switzerland].", "@Switzerland[Switzerland]."),
        ("@country[Switzerland] @0[2]", "@0[2]"),
        ("The mean is @mean 33.69 after removing them.", "@mean 33.69 after removing them."),
        ("@mean_value[3.2]", "@mean_value[3.2]"),
    ],
)
def test_an_answer_outside_the_requests_format(text: str, evidence: str) -> None:
    request = "Answer in the format @country[name], @mean[value]."
    assert answer_concerns(text, request) == [Concern("format", evidence)]


@pytest.mark.parametrize(
    "text",
    [
        "@country[Switzerland], @mean[3.2]",
        "'@country[Switzerland]'",
        "Mail me at someone@example.com: @mean[3.2]",  # an address is not an answer
        "Only one of them: @mean[3.2]",
    ],
)
def test_answers_in_the_requests_format_are_left_alone(text: str) -> None:
    assert answer_concerns(text, "Answer in the format @country[name], @mean[value].") == []


def test_without_a_format_any_answer_form_is_left_alone() -> None:
    assert answer_concerns("The answer is @Switzerland[Switzerland].", "Which country?") == []


def test_a_run_that_gives_no_answer_in_the_requests_format() -> None:
    request = "Answer in the format @mean[value], @n[count]."
    final = "The new column has been created."
    assert unanswered([final], request) == Concern("unanswered", "@mean[value]")
    assert unanswered([final, "   a  b\n0  1  2\n"], request) == Concern(
        "unanswered", "@mean[value]"
    )
    # One of its names written so, in the final answer or printed by a cell, is an answer.
    assert unanswered(["It is @n[3]."], request) is None
    assert unanswered([final, "@mean[2.5]\n"], request) is None
    assert unanswered([final, *printed([out("@mean[2.5]\n")])], request) is None
    # A name the format lacks is not one of its answers (that is the "format" rule's).
    assert unanswered(["@average[2.5]"], request) == Concern("unanswered", "@mean[value]")
    # Without a format, any answer is one.
    assert unanswered([final], "What is the mean?") is None


def test_which_results_may_be_right_as_they_are() -> None:
    # A NaN or an empty frame may be the answer; an answer in the wrong format never is.
    assert may_be_right([Concern("nan", "nan")])
    assert may_be_right([Concern("format", "@x 1"), Concern("empty", "Empty DataFrame")])
    assert not may_be_right([Concern("noop", "df['a'].fillna(0, inplace=True)")])
    assert not may_be_right([Concern("cut", "@m[1, ..., 9]")])
    assert not may_be_right([Concern("format", "@x 1"), Concern("answer", "@mean[nan]")])


#: pandas 3's warning for a chained in-place change, as a kernel shows it on stderr.
CHAINED = (
    "/tmp/ipykernel_1/2.py:7: ChainedAssignmentError: A value is being set on a copy of a "
    "DataFrame or Series through chained assignment using an inplace method.\n"
    "Such inplace method never works to update the original DataFrame or Series, because the "
    "intermediate object on which we are setting values always behaves as a copy.\n\n"
    "For example, when doing 'df[col].method(value, inplace=True)', try using "
    "'df.method({col: value}, inplace=True)' instead.\n"
    "  df['Self_Employed'].fillna('No', inplace=True)\n"
)


def test_a_change_pandas_says_did_nothing() -> None:
    found = kinds([out("12\n"), out(CHAINED, "stderr")])
    assert found == [("noop", "df['Self_Employed'].fillna('No', inplace=True)")]
    # Another warning after it is not taken for its code line.
    other = "/tmp/x.py:9: FutureWarning: the default will change\n  pd.concat(parts)\n"
    found = kinds([out(CHAINED + other, "stderr")])
    assert found == [("noop", "df['Self_Employed'].fillna('No', inplace=True)")]


def test_streams_are_read_as_the_notebook_shows_them() -> None:
    """Writes to one stream are joined first: a line split across two prints still counts."""
    assert kinds([out("mean: "), out("nan\n")]) == [("nan", "mean: nan")]


def test_the_placeholder_of_the_request_format() -> None:
    request = "Answer format: @mean_fare[mean_value], @count[value] an integer, @n[3]"
    assert placeholders(request) == {"mean_fare": "mean_value", "count": "value", "n": "3"}
    found = answer_concerns("@mean_fare[mean_value] @count[7] @n[3]", request)
    assert found == [Concern("answer", "@mean_fare[mean_value]")]
    # Without the request, a word is a value like any other.
    assert answer_concerns("@mean_fare[mean_value]") == []
    assert kinds([out("@count[value]\n")], request) == [("answer", "@count[value]")]


def test_the_syntax_described_is_no_answer_the_request_asks_for() -> None:
    # The bench's requests say how to write answers ("one @name[value] for each answer"):
    # the format reminder listed @name[value] among the answers, and an own fix of the
    # answer line never acted, waiting for a variable `name`.
    request = build_prompt(
        Task(
            id=56,
            question="Which country?",
            constraints="",
            format="@max_country[country_name] @max_year[year]",
            file_name="estimated_numbers.csv",
            data_path=None,
        )
    )
    assert ANSWER_SYNTAX in request
    assert placeholders(request) == {"max_country": "country_name", "max_year": "year"}
    reminder = format_reminder([Concern("format", "@Nigeria[2010]")], request)
    assert ANSWER_SYNTAX not in reminder
    assert "@max_country[country_name] @max_year[year]." in reminder
    # Printed as the answer, the syntax is not in the request's format.
    assert answer_concerns(f"{ANSWER_SYNTAX}\n", request) == [Concern("format", ANSWER_SYNTAX)]


def test_descriptions_with_and_without_the_evidence() -> None:
    concerns = [Concern("nan", "mean: nan"), Concern("empty", "Empty DataFrame")]
    assert describe_concerns(concerns) == (
        "- a result is NaN (not a number): `mean: nan`\n"
        "- a data frame or series is empty: `Empty DataFrame`"
    )
    assert describe_concerns(concerns, evidence=False) == (
        "- a result is NaN (not a number)\n- a data frame or series is empty"
    )
    long = output_concerns([out("x: nan" + " " * 3 + "\n" + "Error: " + "y" * 300 + "\n")])
    assert len(long[1].evidence) == 120
    assert long[1].evidence.endswith("…")


def test_an_answer_written_another_way_is_told_the_requests_names() -> None:
    request = (
        "Answer as @outliers[list of years, ascending] @mean[mean_value] @std[std], where the"
        " values are rounded to two decimals."
    )
    reminder = format_reminder([Concern("format", "@1990[2.5]")], request)
    assert reminder == (
        "The request asks for these answers, with these names exactly: @outliers[list of years,"
        " ascending] @mean[mean_value] @std[std]. Print each one from the value the cell"
        ' computed, e.g. print(f"@outliers[{outliers}]").'
    )
    assert format_reminder([Concern("unanswered", "@mean[mean_value]")], request) == reminder
    one = format_reminder([Concern("format", "@n 3")], "Count them, as @n[" + "x" * 90 + "].")
    assert one.startswith("The request asks for this answer, with this name exactly: @n[x")
    assert "x" * 60 + "]" in one
    assert "x" * 61 not in one
    assert "Print it from" in one
    # Other concerns are about the value, not how it is written; no format, nothing to say.
    assert format_reminder([Concern("nan", "mean: nan")], request) == ""
    assert format_reminder([Concern("format", "@x 1")], "What is the mean?") == ""
