# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Go time.Duration strings: time.ParseDuration and Duration.String()."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration

NS = 1
MS = 10**6
SECOND = 10**9
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", 90 * SECOND),
        ("1h30m", HOUR + 30 * MINUTE),
        ("0s", 0),
        ("0", 0),
        ("2m", 2 * MINUTE),
        ("1.5h", HOUR + 30 * MINUTE),
        ("300ms", 300 * MS),
        ("1h0m0.5s", HOUR + SECOND // 2),
        ("-1s", -SECOND),
        ("+5m", 5 * MINUTE),
        ("168h", 168 * HOUR),
        (".5s", SECOND // 2),
        ("1.s", SECOND),
        ("1us", 1000 * NS),
        ("1\u00b5s", 1000 * NS),
        ("1\u03bcs", 1000 * NS),
        ("7ns", 7 * NS),
        ("1.000000001s", SECOND + 1),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("", 'time: invalid duration ""'),
        ("5", 'time: missing unit in duration "5"'),
        ("abc", 'time: invalid duration "abc"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1h5", 'time: missing unit in duration "1h5"'),
        ("-", 'time: invalid duration "-"'),
        (".s", 'time: invalid duration ".s"'),
        ("1mx", 'time: unknown unit "mx" in duration "1mx"'),
    ],
)
def test_parse_duration_errors(text, message):
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert str(err.value) == message


def test_parse_duration_rejects_non_strings():
    with pytest.raises(DurationError):
        parse_duration(None)
    with pytest.raises(DurationError):
        parse_duration(90)


@pytest.mark.parametrize(
    "ns, expected",
    [
        (0, "0s"),
        (60e9, "1m0s"),
        (120e9, "2m0s"),
        (168 * HOUR, "168h0m0s"),
        (1.5 * SECOND, "1.5s"),
        (300 * MS, "300ms"),
        (90 * SECOND, "1m30s"),
        (HOUR + 30 * MINUTE, "1h30m0s"),
        (-SECOND, "-1s"),
        (1, "1ns"),
        (1500, "1.5\u00b5s"),
        (SECOND + 1, "1.000000001s"),
        (HOUR + SECOND // 2, "1h0m0.5s"),
    ],
)
def test_format_duration(ns, expected):
    assert format_duration(ns) == expected


@pytest.mark.parametrize("text", ["0s", "1m0s", "2m0s", "168h0m0s", "1.5s", "300ms", "1h30m0s", "-1s", "1h0m0.5s", "1.5\u00b5s", "7ns"])
def test_round_trip_from_text(text):
    assert format_duration(parse_duration(text)) == text


@pytest.mark.parametrize("ns", [0, 1, 999, 1000, MS, SECOND - 1, SECOND, 90 * SECOND, 2 * MINUTE, 168 * HOUR, HOUR + 1, -(HOUR + 1)])
def test_round_trip_from_nanoseconds(ns):
    assert parse_duration(format_duration(ns)) == ns
