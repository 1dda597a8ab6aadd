# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""A per-process memo of a few answers: a module run reads, plans, redacts and plans again from the same few texts."""

from __future__ import annotations

KEPT = 16  # answers kept per memo; the oldest goes first


def remembered(memo, key, compute, kept=KEPT):
    """``memo[key]``, computed once with ``compute()`` (an exception is not remembered); at most ``kept`` entries."""
    if key not in memo:
        value = compute()
        if len(memo) >= kept:
            memo.pop(next(iter(memo)))
        memo[key] = value
    return memo[key]
