# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kubernetes resource.Quantity: ParseQuantity's syntax, values, errors and String() (apimachinery quantity_test.go cases)."""

from decimal import Decimal

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._quantity import (
    ERR_FORMAT,
    ERR_NUMERIC,
    ERR_SUFFIX,
    QuantityError,
    canonical,
    parse_quantity,
)


@pytest.mark.parametrize(
    "text, value, string",
    [
        ("0", 0, "0"),
        ("100Mi", 100 * 2**20, "100Mi"),
        ("1Ki", 1024, "1Ki"),
        ("1.5Gi", 3 * 2**29, "1536Mi"),
        ("-0.5Gi", -(2**29), "-512Mi"),
        ("0.5Ki", 512, "512"),
        ("1023Ki", 1023 * 1024, "1023Ki"),
        ("1024Mi", 2**30, "1Gi"),
        ("1000", 1000, "1k"),
        ("2000", 2000, "2k"),
        ("1.5k", 1500, "1500"),
        ("1500m", Decimal("1.5"), "1500m"),
        ("0.1", Decimal("0.1"), "100m"),
        ("100m", Decimal("0.1"), "100m"),
        ("1M", 10**6, "1M"),
        ("1E", 10**18, "1E"),
        ("1e3", 1000, "1e3"),
        ("1E3", 1000, "1E3"),
        ("1e-3", Decimal("0.001"), "1e-3"),
        ("1.5e3", 1500, "1500"),
        ("5n", Decimal("5e-9"), "5n"),
        ("0.1n", Decimal("1e-9"), "1n"),  # rounded up to 1n, not down to 0
        ("-0.1n", Decimal("-1e-9"), "-1n"),  # away from zero
        ("1e-12", Decimal("1e-9"), "1e-9"),
        ("+5Mi", 5 * 2**20, "+5Mi"),  # Go keeps canonical input text as it is
        ("-100Mi", -100 * 2**20, "-100Mi"),
        ("0Mi", 0, "0"),
        ("-0", 0, "0"),
        ("000", 0, "0"),
        ("Mi", 0, "0"),  # Go: an empty number is 0
        (".", 0, "0"),
        ("1.", 1, "1."),  # canonical enough for Go to keep the text
        (".5", Decimal("0.5"), "500m"),
        ("12345678901234567890", 12345678901234567890, "12345678901234567890"),
        ("9223372036854775807Ki", 2**63 - 1, "9223372036854775807"),  # binary values are capped at int64
    ],
)
def test_parse_quantity(text, value, string):
    q = parse_quantity(text)
    assert q.value == Decimal(value)
    assert str(q) == string


@pytest.mark.parametrize(
    "text, error",
    [
        ("", ERR_FORMAT),
        ("abc", ERR_FORMAT),
        ("1.2.3", ERR_FORMAT),
        ("5%", ERR_FORMAT),
        (" 5", ERR_FORMAT),
        ("5 ", ERR_FORMAT),
        ("1_0", ERR_FORMAT),
        ("1Qi", ERR_FORMAT),
        ("1Gi1", ERR_SUFFIX),
        ("1e", ERR_SUFFIX),
        ("1ki", ERR_SUFFIX),
        ("1KiB", ERR_FORMAT),
        ("1mM", ERR_SUFFIX),
        (".e-10", ERR_NUMERIC),
        (None, ERR_FORMAT),
        (5, ERR_FORMAT),
    ],
)
def test_parse_quantity_errors(text, error):
    with pytest.raises(QuantityError) as exc:
        parse_quantity(text)
    assert str(exc.value) == error


def test_error_texts_are_apimachinerys():
    assert ERR_FORMAT == "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    assert ERR_NUMERIC == "unable to parse numeric part of quantity"
    assert ERR_SUFFIX == "unable to parse quantity's suffix"


def test_equality_is_by_value():
    assert parse_quantity("100Mi") == parse_quantity("104857600")
    assert parse_quantity("1k") == parse_quantity("1000") == parse_quantity("1e3")
    assert parse_quantity("1Ki") != parse_quantity("1k")
    assert parse_quantity("-1").sign() == -1 and parse_quantity("0").sign() == 0 and parse_quantity("1n").sign() == 1


def test_huge_exponents_stay_symbolic():
    assert str(parse_quantity("1e2147483647")) == "10e2147483646"
    assert parse_quantity("1e4294967296").value == 1  # Go truncates the exponent to int32


@pytest.mark.parametrize(
    "value, fmt, string",
    [
        (Decimal(0), "BinarySI", "0"),
        (Decimal(1536), "BinarySI", "1536"),
        (Decimal(2048), "BinarySI", "2Ki"),
        (Decimal("1024.5"), "BinarySI", "1024500m"),
        (Decimal(1500000), "DecimalSI", "1500k"),
        (Decimal(10**21), "DecimalSI", "1e21"),
        (Decimal(1000), "DecimalExponent", "1e3"),
        (Decimal("0.01"), "DecimalExponent", "10e-3"),
    ],
)
def test_canonical(value, fmt, string):
    assert canonical(value, fmt) == string
