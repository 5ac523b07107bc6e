"""The options table and the parsing of ``%%ci`` lines derived from it."""

from __future__ import annotations

import pytest

from jupyter_ci.arguments import OptionsError
from jupyter_ci.magics import make_parser
from jupyter_ci.magics import parse_line as parse_magic_line
from jupyter_ci.options import OPTIONS, OPTIONS_BY_NAME, option
from jupyter_ci.settings import Settings, settings_field_names


def test_settings_fields_are_the_options_in_order() -> None:
    assert settings_field_names() == [opt.name for opt in OPTIONS]
    defaults = Settings()
    for opt in OPTIONS:
        assert getattr(defaults, opt.name) == opt.default, opt.name


def test_design_names_exist_with_their_flags() -> None:
    for name in [
        "model",
        "api_base",
        "api_key_env",
        "mode",
        "max_attempts",
        "max_steps",
        "timeout",
        "context_tokens",
        "max_tokens_per_run",
        "max_cost_per_run",
    ]:
        assert name in OPTIONS_BY_NAME
    assert option("max_attempts").flag == "--max-attempts"
    assert option("model").env_var == "JUPYTER_CI_MODEL"
    assert option("mode").choices == ("auto", "review", "insert")
    with pytest.raises(KeyError, match="known options"):
        option("nope")


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("max_attempts", "2", 2),
        ("max_attempts", 4.0, 4),
        ("timeout", "0", 0.0),
        ("allow_pip_install", "yes", True),
        ("allow_pip_install", "off", False),
        ("mode", " review ", "review"),
    ],
)
def test_coerce_accepts(name: str, raw: object, expected: object) -> None:
    assert option(name).coerce(raw) == expected


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("max_attempts", "two", "--max-attempts expects a whole number"),
        ("max_attempts", 0, "--max-attempts must be at least 1"),
        ("max_attempts", 2.5, "whole number"),
        ("max_attempts", True, "whole number"),
        ("mode", "yolo", "--mode must be one of auto, review, insert"),
        ("timeout", -1, "at least 0"),
        ("allow_pip_install", "maybe", "true or false"),
        ("model", 3, "a string"),
    ],
)
def test_coerce_refuses_with_the_flag_named(name: str, raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        option(name).coerce(raw)


def test_magic_line_options_then_verbatim_prompt() -> None:
    given, progress, prompt = parse_magic_line(
        "--max-attempts 2 -m openai/x --progress text plot   the $x {y} 'data'"
    )
    assert given == {"max_attempts": "2", "model": "openai/x"}
    assert progress == "text"
    assert prompt == "plot   the $x {y} 'data'"


def test_magic_line_aliases_and_equals_form() -> None:
    assert parse_magic_line("--review do it") == ({"mode": "review"}, None, "do it")
    assert parse_magic_line("--no-run do it") == ({"mode": "insert"}, None, "do it")
    assert parse_magic_line("--mode=insert x") == ({"mode": "insert"}, None, "x")
    assert parse_magic_line("--regenerate x") == ({"regenerate": True}, None, "x")


def test_magic_line_without_options_keeps_leading_text() -> None:
    assert parse_magic_line("don't use -m here") == ({}, None, "don't use -m here")
    assert parse_magic_line('{"a": 1} as json') == ({}, None, '{"a": 1} as json')
    assert parse_magic_line("-- --review is literal") == ({}, None, "--review is literal")
    assert parse_magic_line("") == ({}, None, "")


def test_magic_line_errors_say_what_is_wrong() -> None:
    with pytest.raises(OptionsError, match="unknown option --max-attempt"):
        parse_magic_line("--max-attempt 2 go")
    with pytest.raises(OptionsError, match="needs a value"):
        parse_magic_line("--max-attempts")


def test_server_only_options_are_not_magic_flags() -> None:
    text = make_parser().format_help()
    assert "--max-attempts" in text
    assert "--review" in text
    assert "--api-key-env" not in text
    assert "--db-path" not in text
    with pytest.raises(OptionsError, match="unknown option --db-path"):
        parse_magic_line("--db-path /tmp/x go")
