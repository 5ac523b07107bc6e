"""jupyter-ci's own fixes (jupyter_ci/agent/own_fix.py): what they change and what they refuse."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from jupyter_ci.agent.fix_context import fix_context_here
from jupyter_ci.agent.own_fix import (
    NUMERIC_ONLY_LINE,
    POSITIONAL_LINE,
    SPELLED_LINE,
    answer_names,
    assigned_back,
    named_file,
    numeric_frames,
    own_fix,
    positionals,
    renames_columns,
    respelled,
    spellings,
)

SPACED = pd.DataFrame({"DATE": [1], " WINDSPEED": [2.0], "avg. wait time ": [3.0]})


def fix_of(namespace: dict[str, Any], code: str) -> str | None:
    """Run ``code`` in ``namespace`` as the kernel would, and return jupyter-ci's fix of it."""
    with pytest.raises((KeyError, NameError)) as raised:
        exec(code, namespace)  # noqa: S102 - the test's own code, for the real error text
    ename, evalue = type(raised.value).__name__, str(raised.value)
    lines, pairs = spellings(fix_context_here(namespace, ename, evalue, code))
    lines, positional = positionals(lines)
    for line in lines:  # never to the model
        assert not line.startswith((SPELLED_LINE, POSITIONAL_LINE)), line
    fixed = own_fix(code, ename, evalue, pairs, positional)
    return None if fixed is None else fixed.code


@pytest.mark.parametrize(
    "code",
    [
        "w['WINDSPEED'].mean()",  # KeyError: 'WINDSPEED'
        'w.dropna(subset=["WINDSPEED"])["WINDSPEED"].mean()',  # KeyError: ['WINDSPEED']
        "w[['DATE', 'WINDSPEED']]",  # "['WINDSPEED'] not in index"
        # Inside an f-string's field (tokenized as one string before Python 3.12).
        "print(f\"@mean[{w['WINDSPEED'].mean():.2f}]\")",
        "print(f\"@m[{ {'a': w['WINDSPEED'].sum()} }] é {w['DATE'].sum()}\")",
        # After non-ASCII text on the line (ast counts bytes).
        "label = 'é'; w['WINDSPEED'].mean()",
    ],
)
def test_a_name_written_without_its_spaces_is_respelled_everywhere(code: str) -> None:
    namespace: dict[str, Any] = {"w": SPACED.copy()}
    fixed = fix_of(namespace, code)
    assert fixed is not None
    assert "'WINDSPEED'" not in fixed
    assert '"WINDSPEED"' not in fixed
    assert fixed == code.replace("WINDSPEED", " WINDSPEED")  # the quotes are the code's own
    exec(fixed, namespace)  # noqa: S102 - it runs now


def test_every_spaced_name_of_the_cell_at_once_not_one_attempt_each() -> None:
    code = "w['WINDSPEED'] / w['avg. wait time']\nlabel = 'WINDSPEED'"
    fixed = fix_of({"w": SPACED.copy()}, code)
    assert fixed == ("w[' WINDSPEED'] / w['avg. wait time ']\nlabel = ' WINDSPEED'")


@pytest.mark.parametrize(
    ("code", "fixed"),
    [
        ("w['windspeed'].mean()", "w[' WINDSPEED'].mean()"),
        ("w['avg.wait_time'].mean()", "w['avg. wait time '].mean()"),
        ("w['Avg_Wait_Time'].max()", "w['avg. wait time '].max()"),
        # Only the name the error is about: another literal of the cell that is a column's
        # once case is set aside is the model's (it may be a method's name, a label).
        ("label = 'date'\nw['windspeed']", "label = 'date'\nw[' WINDSPEED']"),
    ],
)
def test_the_missing_name_is_respelled_whatever_its_case_and_punctuation(
    code: str, fixed: str
) -> None:
    namespace: dict[str, Any] = {"w": SPACED.copy()}
    assert fix_of(namespace, code) == fixed
    exec(fixed, namespace)  # noqa: S102 - it runs now


def test_two_columns_of_one_name_so_leave_no_fix() -> None:
    frame = pd.DataFrame({"DATE_TIME": [1], "date time": [2]})
    assert fix_of({"w": frame}, "w['DateTime']") is None


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("w['SPEED']", "another name"),
        ("w['WINDSPEED2']", "another name: a digit more"),
        ("w[f'WIND{\"SPEED\"}']", "no plain literal names it"),
        ("w[f'WINDSPEED']", "an f-string's own text is no literal to respell"),
    ],
)
def test_no_fix_where_the_kernel_does_not_leave_one(code: str, why: str) -> None:
    namespace: dict[str, Any] = {"w": SPACED.copy()}
    assert fix_of(namespace, code) is None, why


def test_two_columns_that_differ_only_by_spaces_leave_no_fix() -> None:
    frame = pd.DataFrame({" A": [1], "A ": [2]})
    assert fix_of({"w": frame}, "w['A']") is None


def test_a_forged_pair_can_only_respell() -> None:
    lines = [
        f'{SPELLED_LINE}["x", "__import__(\'os\')"]',
        f'{SPELLED_LINE}["y", "y()"]',
        f'{SPELLED_LINE}["..", ".__"]',
        f'{SPELLED_LINE}["A", " A "]',
        f"{SPELLED_LINE}not json",
        "df is a DataFrame with columns: ' A '",
    ]
    kept, pairs = spellings(lines)
    assert kept == ["df is a DataFrame with columns: ' A '"]
    # Other letters, or none, are no respelling; other punctuation is, and stays a string.
    assert pairs == {"y": "y()", "A": " A "}
    fixed = respelled("x = 'x'\ny = 'y'\ndf['A']", pairs)
    assert fixed is not None
    assert fixed.code == "x = 'x'\ny = 'y()'\ndf[' A ']"
    assert fixed.said == "wrote 'y' as 'y()', 'A' as ' A ', as the frame spells it"


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("pd", "import pandas as pd"),
        ("np", "import numpy as np"),
        ("stats", "from scipy import stats"),
    ],
)
def test_a_usual_import_left_out_is_put_first(name: str, line: str) -> None:
    code = f"x = {name}.__name__\nprint(x)"
    fixed = fix_of({}, code)
    assert fixed == f"{line}\n{code}"
    if name != "stats":  # scipy is not among the test dependencies
        exec(fixed, {})  # noqa: S102


def test_any_other_name_is_the_model_to_fix() -> None:
    assert fix_of({}, "import numpy as np\ndel np\nnp.pi") is None  # the import is there
    assert fix_of({}, "dff.head()") is None
    assert fix_of({}, "pdf.head()") is None


PANDAS_3 = pytest.mark.skipif(
    int(pd.__version__.split(".")[0]) < 3, reason="pandas before 3 takes an integer as a position"
)
MONTHLY = pd.Series([1.0, 2.0, 4.0], index=["2015-01", "2015-02", "2015-03"])


@PANDAS_3
@pytest.mark.parametrize(
    "code",
    [
        "print(monthly[0], monthly[-1])",
        "first = monthly[0]\nlast = monthly[len(monthly) - 1]",  # the second is the model's
        'print(f"@first[{monthly[0]:.1f}] é {monthly[1]}")',
        "print('é', monthly[ 2 ], monthly.index[0])",
    ],
)
def test_an_integer_on_a_series_of_labels_is_a_position(code: str) -> None:
    namespace: dict[str, Any] = {"monthly": MONTHLY.copy()}
    fixed = fix_of(namespace, code)
    assert fixed is not None
    for position in ("0", "-1", "1", " 2 "):
        assert f"monthly[{position}]" not in fixed
    assert fixed == code.replace("monthly[", "monthly.iloc[").replace(
        "monthly.iloc[len", "monthly[len"
    )
    if "len(" not in code:
        exec(fixed, namespace)  # noqa: S102 - it runs now


@PANDAS_3
@pytest.mark.parametrize(
    ("namespace", "code"),
    [
        ({"s": pd.Series([1], index=[5])}, "s[0]"),  # integer labels: 0 is meant as one
        ({"df": pd.DataFrame({"a": [1]})}, "df[0]"),  # a frame's column, never a position
        ({"monthly": MONTHLY.copy()}, "monthly['2016-01']"),  # a label that is not there
    ],
)
def test_no_position_where_an_integer_is_a_label(namespace: dict[str, Any], code: str) -> None:
    assert fix_of(namespace, code) is None


def test_a_forged_positional_line_can_only_name_a_name() -> None:
    lines = [
        f'{POSITIONAL_LINE}"monthly"',
        f"{POSITIONAL_LINE}\"__import__('os')\"",
        f"{POSITIONAL_LINE}5",
        f"{POSITIONAL_LINE}not json",
    ]
    assert positionals(lines) == ([], {"monthly"})


PASSENGERS = pd.DataFrame(
    {"Name": ["Braund, Mr. Owen", "Cumings, Mrs. John"], "Sex": ["male", "female"]}
    | {"Age": [22.0, 38.0], "Fare": [7.25, 71.28], "Survived": [0, 1]}
)


def reduction_fixed(namespace: dict[str, Any], code: str) -> str | None:
    """Run ``code`` as the kernel would: it raises on the frame's text; jupyter-ci's fix."""
    with pytest.raises((TypeError, ValueError)) as raised:
        exec(code, namespace)  # noqa: S102 - the test's own code, for the real error text
    ename, evalue = type(raised.value).__name__, str(raised.value)
    lines, numeric = numeric_frames(fix_context_here(namespace, ename, evalue, code))
    assert not any(line.startswith(NUMERIC_ONLY_LINE) for line in lines)  # never to the model
    fixed = own_fix(code, ename, evalue, {}, set(), [], numeric)
    return None if fixed is None else fixed.code


@pytest.mark.parametrize(
    ("code", "fixed"),
    [
        # The dev set's 310 and 117: a 1.5B model wrote it in all three tries.
        ("matrix = titanic.corr()", "matrix = titanic.corr(numeric_only=True)"),
        (
            "print(titanic.corr(method='spearman')['Age'].idxmax(), 'é')",
            "print(titanic.corr(method='spearman', numeric_only=True)['Age'].idxmax(), 'é')",
        ),
        (
            "by_sex = titanic.groupby('Sex').mean()\nspread = titanic.std()",
            "by_sex = titanic.groupby('Sex').mean(numeric_only=True)\n"
            "spread = titanic.std(numeric_only=True)",
        ),
        (
            "m = titanic.mean(\n    skipna=True,\n)",
            "m = titanic.mean(\n    skipna=True,\nnumeric_only=True)",
        ),
    ],
)
def test_a_reduction_that_raised_on_text_columns_leaves_them_out(code: str, fixed: str) -> None:
    namespace: dict[str, Any] = {"titanic": PASSENGERS.copy()}
    assert reduction_fixed(namespace, code) == fixed
    exec(fixed, namespace)  # noqa: S102 - it runs now, as pandas before 2 ran the cell


@pytest.mark.parametrize(
    "code",
    [
        "titanic['Name'].mean()",  # a column: the model's to convert or leave
        "titanic.corr(numeric_only=False)",  # asked for as it is
        "titanic.mean(**options)",  # may pass it already
        "titanic.groupby('Sex')['Name'].mean()",  # one column of text
        "float(titanic['Name'][0])",  # no reduction at all
    ],
)
def test_no_numeric_only_where_the_cell_means_its_columns(code: str) -> None:
    namespace: dict[str, Any] = {"titanic": PASSENGERS.copy(), "options": {}}
    assert reduction_fixed(namespace, code) is None


def test_a_frame_of_numbers_is_never_named_for_numeric_only() -> None:
    numbers = PASSENGERS[["Age", "Fare"]].copy()
    code = "numbers.corr(); int('x')"
    lines = fix_context_here({"numbers": numbers}, "ValueError", "could not convert", code)
    assert numeric_frames(lines) == (lines, set())
    forged = [f'{NUMERIC_ONLY_LINE}"titanic"', f"{NUMERIC_ONLY_LINE}\"__import__('os')\""]
    assert numeric_frames(forged) == ([], {"titanic"})


MISSING = "[Errno 2] No such file or directory: 'unemployment_industry.csv'"


@pytest.mark.parametrize(
    ("named", "fixed"),
    [
        # The dev set's 19 and 23: the model "corrected" the name the request gives.
        (["unemployement_industry.csv"], "pd.read_csv('unemployement_industry.csv')"),
        (["other.csv", "unemployement_industry.csv"], "pd.read_csv('unemployement_industry.csv')"),
        (["unemployement_industry.csv", "unemployment_industry2.csv"], None),  # two: which?
        (["sales.csv"], None),  # another file: the model's to find
        ([], None),  # the request names none
    ],
)
def test_a_slip_in_the_name_of_the_file_the_request_names(
    named: list[str], fixed: str | None
) -> None:
    code = "pd.read_csv('unemployment_industry.csv')"
    own = own_fix(code, "FileNotFoundError", MISSING, {}, named=named)
    assert (own.code if own else None) == fixed
    if own is not None:
        assert own.said == (
            "wrote 'unemployment_industry.csv' as 'unemployement_industry.csv', "
            "as the request names it"
        )
        assert own.respelled == {}  # a file's name: the model's later fixes are not held to it


def test_a_file_in_a_folder_keeps_its_folder() -> None:
    code = 'df = pd.read_csv("data/iris_data.csv")'
    evalue = "[Errno 2] No such file or directory: 'data/iris_data.csv'"
    own = named_file(code, evalue, ["data/iris-data.csv"])
    assert own is not None
    assert own.code == 'df = pd.read_csv("data/iris-data.csv")'


@pytest.mark.parametrize(
    ("code", "renames"),
    [
        ("w.columns = w.columns.str.strip()\nw['WINDSPEED'].mean()", True),
        ("w = pd.read_csv('w.csv', skipinitialspace=True)", True),
        ("w = w.rename(columns={' WINDSPEED': 'wind'})", True),
        ("w.columns = [c.lower() for c in w.columns]", True),
        ("w = w.set_axis(['a', 'b'], axis=1)", True),
        ("w.columns = w.columns.str.replace(' ', '')", True),
        ("w['WINDSPEED'].mean()", False),
        ("print(w.columns == ['a'])", False),
        ("w['name'].str.strip()", True),  # may be the column's values: held back all the same
    ],
)
def test_a_fix_that_renames_columns_is_not_respelled(code: str, renames: bool) -> None:
    # The model's later fix is held to an earlier spelling only when it leaves the names alone.
    assert renames_columns(code) is renames


def test_a_cell_with_a_magic_line_is_respelled_around_it() -> None:
    # IPython runs the cell, so the kernel's error comes from it; the magic's line is kept.
    code = "%matplotlib inline\n!ls\nw['WINDSPEED'].mean()"
    lines = fix_context_here({"w": SPACED.copy()}, "KeyError", "'WINDSPEED'", code)
    _, pairs = spellings(lines)
    assert pairs == {"WINDSPEED": " WINDSPEED"}
    fixed = respelled(code, pairs)
    assert fixed is not None
    assert fixed.code == "%matplotlib inline\n!ls\nw[' WINDSPEED'].mean()"


# --- an answer printed with a value for its name -------------------------------------------------

#: The dev set's 56: the answer's names are the cell's variables, printed as the answer's name.
BY_VALUE = (
    "country = 'x'\n"
    "max_deaths_country = 'Nigeria'\n"
    "max_deaths_year = 2010\n"
    "# the final answer line\n"
    'print(f"@{max_deaths_country}[{max_deaths_year}]")\n'
    "print('done')\n"
)


def test_an_answer_printed_with_a_value_for_its_name_is_printed_with_the_names() -> None:
    fixed = answer_names(BY_VALUE, ["max_deaths_country", "max_deaths_year"])
    assert fixed is not None
    assert fixed.code == BY_VALUE.replace(
        'print(f"@{max_deaths_country}[{max_deaths_year}]")\n',
        "print(f'@max_deaths_country[{max_deaths_country}]')\n"
        "print(f'@max_deaths_year[{max_deaths_year}]')\n",
    )
    assert "@max_deaths_country[...] @max_deaths_year[...]" in fixed.said
    namespace: dict[str, Any] = {}
    printed: list[str] = []
    namespace["print"] = lambda *args: printed.append(" ".join(map(str, args)))
    exec(fixed.code, namespace)  # noqa: S102 - the test's own code
    assert printed == ["@max_deaths_country[Nigeria]", "@max_deaths_year[2010]", "done"]


def test_the_value_keeps_the_format_its_field_gave_it() -> None:
    code = "mean_fare = 34.6545\nprint(f'@{mean_fare}[{mean_fare:.2f}]')  # the answer"
    fixed = answer_names(code, ["mean_fare"])
    assert fixed is not None
    # The cell's last line, as it was: no line end added.
    assert fixed.code == "mean_fare = 34.6545\nprint(f'@mean_fare[{mean_fare:.2f}]')"


def test_a_name_without_its_variable_gets_the_one_value_the_line_printed() -> None:
    # The dev set's 123: the right country printed where the name goes, three times.
    code = "top = means.idxmax()\nprint(f\"@{top}['Albania']\")\n"
    fixed = answer_names(code, ["country_with_highest_mean"])
    assert fixed is not None
    assert fixed.code == "top = means.idxmax()\nprint(f'@country_with_highest_mean[{top}]')\n"
    # Two values for it, or two names without a variable: which is which is not known.
    assert answer_names(code.replace("['Albania']", "[{other}]"), ["country"]) is None
    assert answer_names(code, ["country", "mean"]) is None


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ('print(f"@answer[{mean_fare:.2f}]")', "another name"),
        ('print(f"@mean_fare {mean_fare:.2f}")', "no [value]"),
        ('print(f"The answer: @mean_fare = {mean_fare:.2f}")', "no [value], after words"),
    ],
)
def test_an_answer_written_another_way_is_printed_with_the_names(written: str, why: str) -> None:
    fixed = answer_names(f"mean_fare = 34.6545\n{written}\n", ["mean_fare"])
    assert fixed is not None, why
    assert fixed.code == "mean_fare = 34.6545\nprint(f'@mean_fare[{mean_fare:.2f}]')\n", why


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (BY_VALUE.replace("max_deaths_year = 2010", "year = 2010"), "a name the cell never sets"),
        (
            BY_VALUE.replace("max_deaths_year = 2010", "if country:\n    max_deaths_year = 2010"),
            "a name set only inside a block",
        ),
        (
            BY_VALUE.replace('print(f"@{max_deaths', 'if True:\n    print(f"@{max_deaths'),
            "the print inside a block",
        ),
        (BY_VALUE.replace('print(f"@{max_deaths', 'x = 1; print(f"@{max_deaths'), "after a ';'"),
        (BY_VALUE.replace('f"@{max_deaths_country}', 'f"@max_deaths_country'), "a name as text"),
        (BY_VALUE.replace("print(f", "log(f"), "no print"),
        ("%%bash\necho '@x[1]'", "not Python"),
        (
            BY_VALUE.replace('f"@{max_deaths_country}[{max_deaths_year}]"', 'f"mail@x.org {x}"'),
            "no answer line: an address",
        ),
    ],
)
def test_no_answer_fix_unless_the_cell_leaves_one(code: str, why: str) -> None:
    assert answer_names(code, ["max_deaths_country", "max_deaths_year"]) is None, why


def test_names_that_are_no_python_names_leave_no_fix() -> None:
    assert answer_names("lambda_ = 1\nprint(f'@{lambda_}[1]')", ["lambda"]) is None
    assert answer_names(BY_VALUE, []) is None


# --- a change pandas 3 says did nothing, assigned back ------------------------------------

LOANS = """import pandas as pd
df = pd.DataFrame({'LoanAmount': [100.0, None, 160.0], 'Self_Employed': ['Yes', None, 'No']})
df['Self_Employed'].fillna('No', inplace=True)
df['LoanAmount'].fillna(df['LoanAmount'].median(), inplace=True)  # the median
for column in ['LoanAmount']:
    df.loc[df[column] > 150, column].clip(
        upper=150, inplace=True)
std = df['LoanAmount'].std()"""


def test_an_in_place_change_of_a_column_is_assigned_back() -> None:
    fix = assigned_back(LOANS)
    assert fix is not None
    assert fix.code.splitlines()[2:7] == [
        "df['Self_Employed'] = df['Self_Employed'].fillna('No')",
        "df['LoanAmount'] = df['LoanAmount'].fillna(df['LoanAmount'].median())  # the median",
        "for column in ['LoanAmount']:",
        "    df.loc[df[column] > 150, column] = df.loc[df[column] > 150, column].clip(upper=150)",
        "std = df['LoanAmount'].std()",
    ]
    assert fix.said == (
        "assigned the change back, as pandas 3 needs: df['Self_Employed'] = "
        "df['Self_Employed'].fillna(...), df['LoanAmount'] = df['LoanAmount'].fillna(...), "
        "df.loc[df[column] > 150, column] = df.loc[df[column] > 150, column].clip(...)"
    )
    # What the cell meant, in the pandas it runs on: the gaps filled, the values clipped.
    fixed: dict[str, Any] = {}
    exec(fix.code, fixed)  # noqa: S102 - the test's own code
    assert fixed["df"]["Self_Employed"].tolist() == ["Yes", "No", "No"]
    assert fixed["df"]["LoanAmount"].tolist() == [100.0, 130.0, 150.0]


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("df.fillna(0, inplace=True)", "the frame's own method changes it"),
        ("s = df['a']\ns.fillna(0, inplace=True)", "a Series of its own changes"),
        ("df['a']['b'].fillna(0, inplace=True)", "an item of an item: assigned, still chained"),
        ("df['a'].dropna(inplace=True)", "assigned back, pandas aligns: the rows stay"),
        ("df['a'].sort_values(inplace=True)", "the same"),
        ("df['a'].fillna(0, inplace=False)", "no in-place change"),
        ("df['a'].fillna(0, inplace=flag)", "whether in place is not written"),
        ("x = 1; df['a'].fillna(0, inplace=True)", "another statement on its line"),
        ("df['a'].fillna(0, inplace=True); x = 1", "the same, after it"),
        ("df['a'].fillna(\n    0,  # zero\n    inplace=True)", "its comment would be lost"),
        ("df['a'].fillna(**options, inplace=True)", "arguments it cannot write one by one"),
        ("filled = df['a'].fillna(0, inplace=True)", "its None is used"),
        ("df['a'].fillna(0, inplace=True", "no Python"),
    ],
)
def test_no_assignment_unless_it_is_the_change_meant(code: str, why: str) -> None:
    assert assigned_back(code) is None, why
