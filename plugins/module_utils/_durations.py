# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Go ``time.Duration`` strings, as the kubelet reads and prints them (``90s``, ``1h30m``, ``2m0s``)."""

from __future__ import annotations

import re

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

NS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 1000000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
MAX_NS = 2**63 - 1  # Go's time.Duration is an int64: the largest is 2562047h47m16.854775807s
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([^\d.]*)")  # the unit is everything up to the next number, as in Go


class DurationError(KubenodeGcError, ValueError):
    pass


def parse_duration(text):
    """Parse a Go duration string to integer nanoseconds; raises DurationError with Go's wording."""
    original = text
    if not isinstance(text, str):
        raise DurationError("time: invalid duration %r" % (original,))
    text = text.strip()
    sign = 1
    if text[:1] in "+-" and text:
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise DurationError('time: invalid duration "%s"' % original)
    total = 0
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if not match:
            raise DurationError('time: invalid duration "%s"' % original)
        number, unit = match.groups()
        if not unit:
            raise DurationError('time: missing unit in duration "%s"' % original)
        if unit not in NS:
            raise DurationError('time: unknown unit "%s" in duration "%s"' % (unit, original))
        whole, _sep, frac = number.partition(".")
        scale = NS[unit]
        total += int(whole or 0) * scale
        if frac:
            total += int(frac) * scale // (10 ** len(frac))
        pos = match.end()
        if total > MAX_NS + (1 if sign < 0 else 0):  # Go accepts -2562047h47m16.854775808s, one more than the positive limit
            raise DurationError('time: invalid duration "%s"' % original)
    return sign * total


def format_duration(ns):
    """Format nanoseconds like Go's time.Duration.String(): 0s, 1.5s, 300ms, 1m0s, 168h0m0s."""
    ns = int(ns)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 10**9:
        for unit, scale in (("ms", 10**6), ("\u00b5s", 10**3), ("ns", 1)):
            if ns >= scale:
                return sign + _decimal(ns, scale) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _decimal(rest, 10**9) + "s"
    if hours:
        return "%s%dh%dm%s" % (sign, hours, minutes, seconds)
    if minutes:
        return "%s%dm%s" % (sign, minutes, seconds)
    return sign + seconds


def _decimal(value, scale):
    whole, frac = divmod(value, scale)
    if not frac:
        return str(whole)
    digits = len(str(scale)) - 1
    return ("%d.%0*d" % (whole, digits, frac)).rstrip("0")
