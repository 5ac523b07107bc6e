"""The suite's checkers: each computes the labelled answer pairs of one question from its CSV.

Checkers read the CSV file the agent gets, with the standard library only, and refuse (raise
``ValueError``) when the answer would be ambiguous: a tie for a maximum, or a value that lies on
a rounding tie, so every label is unambiguous for the data it is computed from.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import date
from decimal import Decimal
from pathlib import Path

Pairs = list[tuple[str, str]]
Check = Callable[[Path], Pairs]
CHECKS: dict[str, Check] = {}


def check(task_id: str) -> Callable[[Check], Check]:
    """Register a checker for the question ``task_id``."""

    def register(function: Check) -> Check:
        CHECKS[task_id] = function
        return function

    return register


def rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows as dicts of strings."""
    with path.open(encoding="utf-8", newline="") as stream:
        return list(csv.DictReader(stream))


def fixed(value: float, places: int) -> str:
    """``value`` rounded to ``places`` decimals, as text; refuses values on a rounding tie."""
    scaled = Decimal(value).scaleb(places)
    if abs(scaled - scaled.to_integral_value(rounding="ROUND_FLOOR") - Decimal("0.5")) < Decimal(
        "1e-6"
    ):
        raise ValueError(f"{value!r} is on a rounding tie at {places} places")
    return f"{value:.{places}f}"


def argmax(totals: dict[str, float]) -> str:
    """The key of the largest value; refuses ties."""
    ordered = sorted(totals.items(), key=lambda item: item[1], reverse=True)
    if len(ordered) > 1 and abs(ordered[0][1] - ordered[1][1]) < 1e-9:
        raise ValueError(f"tie between {ordered[0][0]} and {ordered[1][0]}")
    return ordered[0][0]


def numbers(values: Iterable[str]) -> list[float]:
    """The non-empty values as floats (empty fields are missing values)."""
    return [float(value) for value in values if value.strip()]


# --- sales.csv -------------------------------------------------------------------------------


def _revenue(row: dict[str, str]) -> float:
    return int(row["units"]) * float(row["unit_price"])


@check("sales_mean_units")
def sales_mean_units(path: Path) -> Pairs:
    return [("mean_units", fixed(statistics.fmean(numbers(r["units"] for r in rows(path))), 2))]


@check("sales_total_revenue")
def sales_total_revenue(path: Path) -> Pairs:
    return [("total_revenue", fixed(sum(_revenue(r) for r in rows(path)), 2))]


@check("sales_top_region")
def sales_top_region(path: Path) -> Pairs:
    totals: dict[str, float] = defaultdict(float)
    for row in rows(path):
        totals[row["region"]] += _revenue(row)
    return [("top_region", argmax(totals))]


@check("sales_north_big_orders")
def sales_north_big_orders(path: Path) -> Pairs:
    count = sum(1 for r in rows(path) if r["region"] == "North" and int(r["units"]) > 25)
    return [("count", str(count))]


@check("sales_best_month")
def sales_best_month(path: Path) -> Pairs:
    totals: dict[str, float] = defaultdict(float)
    for row in rows(path):
        totals[row["date"][:7]] += int(row["units"])
    return [("best_month", argmax(totals))]


@check("sales_mean_price_by_product")
def sales_mean_price_by_product(path: Path) -> Pairs:
    prices: dict[str, list[float]] = defaultdict(list)
    for row in rows(path):
        prices[row["product"]].append(float(row["unit_price"]))
    return [(f"mean_price_{p}", fixed(statistics.fmean(prices[p]), 2)) for p in sorted(prices)]


@check("sales_units_price_correlation")
def sales_units_price_correlation(path: Path) -> Pairs:
    data = rows(path)
    units = [float(r["units"]) for r in data]
    prices = [float(r["unit_price"]) for r in data]
    return [("correlation", fixed(statistics.correlation(units, prices), 2))]


@check("sales_weekend_share")
def sales_weekend_share(path: Path) -> Pairs:
    data = rows(path)
    weekend = sum(1 for r in data if date.fromisoformat(r["date"]).weekday() >= 5)
    return [("weekend_percent", fixed(100 * weekend / len(data), 1))]


# --- sensors.csv -----------------------------------------------------------------------------


@check("sensors_missing_temperature")
def sensors_missing_temperature(path: Path) -> Pairs:
    missing = sum(1 for r in rows(path) if not r["temperature"].strip())
    return [("missing_temperature", str(missing))]


@check("sensors_mean_temperature_by_sensor")
def sensors_mean_temperature_by_sensor(path: Path) -> Pairs:
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows(path):
        if row["temperature"].strip():
            values[row["sensor"]].append(float(row["temperature"]))
    return [(f"mean_{s}", fixed(statistics.fmean(values[s]), 2)) for s in sorted(values)]


@check("sensors_filled_humidity_std")
def sensors_filled_humidity_std(path: Path) -> Pairs:
    raw = [r["humidity"] for r in rows(path)]
    mean = statistics.fmean(numbers(raw))
    filled = [float(v) if v.strip() else mean for v in raw]
    return [("humidity_std", fixed(statistics.stdev(filled), 3))]


@check("sensors_hottest_day")
def sensors_hottest_day(path: Path) -> Pairs:
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows(path):
        if row["temperature"].strip():
            values[row["timestamp"][:10]].append(float(row["temperature"]))
    return [("hottest_day", argmax({d: statistics.fmean(v) for d, v in values.items()}))]


@check("sensors_hot_and_dry")
def sensors_hot_and_dry(path: Path) -> Pairs:
    count = 0
    for row in rows(path):
        if row["temperature"].strip() and row["humidity"].strip():
            count += float(row["temperature"]) > 25 and float(row["humidity"]) < 45
    return [("count", str(count))]


@check("sensors_median_humidity_s2")
def sensors_median_humidity_s2(path: Path) -> Pairs:
    values = numbers(r["humidity"] for r in rows(path) if r["sensor"] == "s2")
    return [("median_humidity", fixed(statistics.median(values), 2))]


@check("sensors_afternoon_mean")
def sensors_afternoon_mean(path: Path) -> Pairs:
    values = numbers(r["temperature"] for r in rows(path) if 12 <= int(r["timestamp"][11:13]) <= 17)
    return [("afternoon_mean", fixed(statistics.fmean(values), 2))]


# --- students.csv ----------------------------------------------------------------------------


@check("students_pass_rate")
def students_pass_rate(path: Path) -> Pairs:
    data = rows(path)
    passed = sum(1 for r in data if r["passed"] == "yes")
    return [("pass_percent", fixed(100 * passed / len(data), 1))]


@check("students_best_class")
def students_best_class(path: Path) -> Pairs:
    scores: dict[str, list[float]] = defaultdict(list)
    for row in rows(path):
        scores[row["class"]].append(float(row["score"]))
    means = {group: statistics.fmean(values) for group, values in scores.items()}
    best = argmax(means)
    return [("best_class", best), ("mean_score", fixed(means[best], 2))]


@check("students_hours_score_correlation")
def students_hours_score_correlation(path: Path) -> Pairs:
    data = rows(path)
    hours = [float(r["hours_studied"]) for r in data]
    scores = [float(r["score"]) for r in data]
    return [("correlation", fixed(statistics.correlation(hours, scores), 2))]


@check("students_gender_counts")
def students_gender_counts(path: Path) -> Pairs:
    data = rows(path)
    female = sum(1 for r in data if r["gender"] == "female")
    return [("female_count", str(female)), ("male_count", str(len(data) - female))]


@check("students_older_high_scores")
def students_older_high_scores(path: Path) -> Pairs:
    count = sum(1 for r in rows(path) if int(r["age"]) >= 20 and float(r["score"]) > 70)
    return [("count", str(count))]


@check("students_score_outliers")
def students_score_outliers(path: Path) -> Pairs:
    scores = [float(r["score"]) for r in rows(path)]
    mean, deviation = statistics.fmean(scores), statistics.stdev(scores)
    count = sum(1 for score in scores if abs(score - mean) > 2 * deviation)
    return [("outliers", str(count))]
