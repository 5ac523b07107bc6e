"""The suite's tables, generated deterministically (fixed seeds, ``random.Random``).

- ``sales.csv``: order_id, date (YYYY-MM-DD, 2023), region, product, units, unit_price.
- ``sensors.csv``: timestamp (hourly, YYYY-MM-DD HH:MM:SS), sensor, temperature, humidity; some
  temperature and humidity values are missing (empty fields).
- ``students.csv``: student_id, class, gender, age, hours_studied, score, passed (yes/no).
"""

from __future__ import annotations

import csv
import random
from datetime import date, datetime, timedelta
from pathlib import Path

REGIONS = ("North", "South", "East", "West")
PRODUCTS = ("A", "B", "C")
SENSORS = ("s1", "s2", "s3")
CLASSES = ("A", "B", "C")


def sales_rows() -> list[list[str]]:
    """240 orders over 2023; units fall as the unit price rises."""
    rng = random.Random(20231)  # noqa: S311 (data, not secrets)
    base = {"A": 12.0, "B": 25.0, "C": 40.0}
    orders = []
    for _ in range(240):
        day = date(2023, 1, 1) + timedelta(days=rng.randrange(365))
        product = rng.choice(PRODUCTS)
        price = round(base[product] * rng.uniform(0.7, 1.3), 2)
        units = max(1, min(40, round(38 - 0.7 * price + rng.gauss(0, 5))))
        orders.append((day, rng.choice(REGIONS), product, units, price))
    orders.sort(key=lambda order: order[0])
    return [
        [str(number), day.isoformat(), region, product, str(units), f"{price:.2f}"]
        for number, (day, region, product, units, price) in enumerate(orders, start=1)
    ]


def sensors_rows() -> list[list[str]]:
    """Hourly readings of three sensors over ten days, with gaps."""
    rng = random.Random(7)  # noqa: S311 (data, not secrets)
    offsets = {"s1": 0.0, "s2": 2.5, "s3": -1.5}
    rows = []
    start = datetime(2024, 3, 1)
    for hour in range(240):
        moment = start + timedelta(hours=hour)
        daily = 6.0 * _wave(moment.hour) + 0.15 * (hour // 24)
        for sensor in SENSORS:
            temperature = 20.0 + offsets[sensor] + daily + rng.gauss(0, 1.5)
            humidity = 55.0 - 1.8 * (temperature - 20.0) + rng.gauss(0, 6)
            temp_text = "" if rng.random() < 0.06 else f"{temperature:.2f}"
            humid_text = "" if rng.random() < 0.04 else f"{humidity:.1f}"
            rows.append([moment.strftime("%Y-%m-%d %H:%M:%S"), sensor, temp_text, humid_text])
    return rows


def _wave(hour: int) -> float:
    # A triangle wave: coldest at 4:00, warmest at 16:00 (no trigonometry needed).
    distance = abs(hour - 16)
    distance = min(distance, 24 - distance)
    return 1.0 - distance / 6.0


def students_rows() -> list[list[str]]:
    """150 students; scores rise with hours studied."""
    rng = random.Random(314)  # noqa: S311 (data, not secrets)
    class_bonus = {"A": 3.0, "B": 0.0, "C": -4.0}
    rows = []
    for number in range(1, 151):
        group = rng.choice(CLASSES)
        gender = rng.choice(("female", "male"))
        age = rng.randint(17, 25)
        hours = round(rng.uniform(0, 20), 1)
        score = round(min(100.0, max(0.0, 45 + 2.2 * hours + class_bonus[group] + rng.gauss(0, 9))))
        passed = "yes" if score >= 60 else "no"
        rows.append([str(number), group, gender, str(age), f"{hours:.1f}", str(score), passed])
    return rows


def write_tables(directory: Path) -> list[Path]:
    """Write the suite's CSV files into ``directory``; return their paths."""
    tables = {
        "sales.csv": (
            ("order_id", "date", "region", "product", "units", "unit_price"),
            sales_rows(),
        ),
        "sensors.csv": (("timestamp", "sensor", "temperature", "humidity"), sensors_rows()),
        "students.csv": (
            ("student_id", "class", "gender", "age", "hours_studied", "score", "passed"),
            students_rows(),
        ),
    }
    paths = []
    for name, (header, rows) in tables.items():
        path = directory / name
        with path.open("w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
        paths.append(path)
    return paths
