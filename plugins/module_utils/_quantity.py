# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Kubernetes ``resource.Quantity`` strings (``100Mi``, ``1.5G``, ``500m``, ``1e3``), parsed as apimachinery does.

``parse_quantity`` follows ``resource.ParseQuantity``: the same accepted syntax, the same three
error texts, values finer than 1n rounded away from zero, binary values capped at 2^63-1, and
``str(q)`` gives the canonical form Go prints (``1536Mi``, ``1500m``, ``2k``).
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal, localcontext

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError, OptionError

ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
DECIMAL_NAMES = {exp: name for name, exp in DECIMAL.items()}
MAX_INT64 = 2**63 - 1
_CONTEXT = Context(prec=1000, Emin=MIN_EMIN, Emax=MAX_EMAX)
# parseQuantityString: sign, leading zeros, integer digits, optional fraction, suffix letters, optional signed exponent digits.
_SYNTAX = re.compile(r"([+-]?)(0*)([0-9]*)(?:(\.)([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)\Z")


class QuantityError(KubenodeGcError, ValueError):
    pass


MAX_BYTES = MAX_INT64  # the ceiling of every byte amount: 2^63-1 bytes, what the kubelet's int64 quantities hold


def byte_amount(name, value):
    """The one parser of byte amounts, for the modules' options (image_gc's free_bytes_high/free_bytes_low) and the playbooks'
    variable check: a non-negative integer, or a string of ASCII digits, or a Kubernetes quantity in ASCII that is a whole
    number of bytes (V(50Gi), V(80G), V(1.5Gi)), at most MAX_BYTES. OptionError, one sentence naming ``name`` and the value
    written, otherwise; None stays None. Booleans and floats are refused (a YAML float has lost its digits)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise OptionError("%s must be a number of bytes or a quantity such as 50Gi, got %r." % (name, value))
    if isinstance(value, int):
        amount = value
    else:
        text = value.strip()
        if not text.isascii():
            raise OptionError("%s %r is not a number of bytes or a quantity such as 50Gi: only ASCII digits, a decimal point "
                              "and a unit suffix are accepted." % (name, value))
        try:
            quantity = Quantity(int(text)) if text.isdigit() else parse_quantity(text)
        except QuantityError as exc:
            raise OptionError("%s %r is not a number of bytes or a quantity such as 50Gi: %s." % (name, value, exc)) from None
        # apimachinery caps binary quantities at 2^63-1 (8Ei, 9Ei): here that is above the ceiling, not at it
        amount = MAX_BYTES + 1 if quantity.format == "BinarySI" and quantity.value == MAX_INT64 else quantity.value
    if amount < 0:
        raise OptionError("%s must be 0 or more bytes, got %r." % (name, value))
    if amount > MAX_BYTES:
        raise OptionError("%s %r is more than %d bytes (2^63-1), the most a byte amount may be." % (name, value, MAX_BYTES))
    if amount != int(amount):
        raise OptionError("%s %r is not a whole number of bytes." % (name, value))
    return int(amount)


class Quantity:
    """An exact value (``decimal.Decimal``), its format (DecimalSI, BinarySI, DecimalExponent) and Go's cached text."""

    __slots__ = ("value", "format", "_text")

    def __init__(self, value, fmt="DecimalSI", text=None):
        self.value = value
        self.format = fmt
        self._text = text

    def sign(self):
        return (self.value > 0) - (self.value < 0)

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return "Quantity(%r)" % str(self)

    def __str__(self):
        return self._text if self._text is not None else canonical(self.value, self.format)


def parse_quantity(text):
    """Parse like resource.ParseQuantity; raises QuantityError with apimachinery's message."""
    if not isinstance(text, str) or not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(Decimal(0), "DecimalSI", "0")
    match = _SYNTAX.match(text)
    if not match:
        raise QuantityError(ERR_FORMAT)
    sign, zeros, digits, dot, denom, suffix = match.groups()
    if not (digits or dot or suffix):
        return Quantity(Decimal(0))  # only a sign and zeros
    num, denom, negative = digits or "0", denom or "", sign == "-"
    base, exponent, fmt = _interpret(suffix)
    with localcontext(_CONTEXT):
        # The int64 fast path: exact, and it keeps the input text as the canonical string when that is canonical.
        if fmt == "BinarySI":
            scale, precision = 0, (15 - len(num) - exponent * 3 // 10 - 1) if not denom else -1
        else:
            scale, precision = exponent, 18 - len(num) - len(denom)
        if precision >= 0 and scale - len(denom) >= -9:
            scale -= len(denom)
            shifted = int(num + denom)
            result = shifted << exponent if fmt == "BinarySI" else shifted
            if result <= MAX_INT64:
                if fmt == "BinarySI":
                    cached = exponent % 10 == 0 and shifted & 7 != 0
                else:
                    cached = scale % 3 == 0 and not (num + denom).endswith("000") and (num + denom)[0] != "0"
                return Quantity(Decimal(-result if negative else result).scaleb(scale), fmt, text if cached else None)
        if not (zeros + digits + denom):
            raise QuantityError(ERR_NUMERIC)
        amount = Decimal("%s%s.%s" % (sign, num, denom))
        amount = amount.scaleb(exponent) if base == 10 else amount * 2**exponent
        if amount and amount.as_tuple().exponent < -9:
            amount = amount.quantize(Decimal("1e-9"), rounding=ROUND_UP)  # away from zero, as Go rounds |amount| up
        if fmt == "BinarySI" and abs(amount) > MAX_INT64:
            amount = Decimal(MAX_INT64).copy_sign(amount)
        if fmt == "BinarySI" and 0 < abs(amount) < 1:
            fmt = "DecimalSI"
    return Quantity(amount, fmt)


def _interpret(suffix):
    if suffix in BINARY:
        return 2, BINARY[suffix], "BinarySI"
    if suffix in DECIMAL:
        return 10, DECIMAL[suffix], "DecimalSI"
    if len(suffix) > 1 and suffix[0] in "eE" and re.match(r"[+-]?[0-9]+\Z", suffix[1:]) and abs(int(suffix[1:])) < 2**63:
        return 10, (int(suffix[1:]) + 2**31) % 2**32 - 2**31, "DecimalExponent"  # Go's int32() of the parsed int64
    raise QuantityError(ERR_SUFFIX)


def canonical(value, fmt="DecimalSI"):
    """Go's Quantity.String() for a value: the largest SI (or 1024-power) suffix that keeps an integer mantissa."""
    if value == 0:
        return "0"
    if fmt == "BinarySI" and abs(value) >= 1024 and value == value.to_integral_value():
        mantissa, power = int(value), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa //= 1024
            power += 1
        return "%d%s" % (mantissa, ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power])
    sign, digits, exponent = value.normalize(_CONTEXT).as_tuple()
    mantissa = int("".join(map(str, digits)))
    shift = exponent % 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if fmt == "DecimalExponent" or exponent not in DECIMAL_NAMES:
        suffix = "e%d" % exponent if exponent else ""
    else:
        suffix = DECIMAL_NAMES[exponent]
    return "%s%d%s" % ("-" if sign else "", mantissa, suffix)
