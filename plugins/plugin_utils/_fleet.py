# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Values of the fleet playbooks' per-node records, read once for every filter. Pure: no I/O, no Ansible.

* ``as_int``: a number from a registered result (Jinja may have made it a string); None when it is none.
* ``drift_from_results``: the drift of a node, from its check-mode config module results.
* ``sorted_drift``: a drift list with exactly the report's keys, in a stable order.
"""

from __future__ import annotations

from collections.abc import Mapping

DRIFT_KEYS = ("component", "key", "desired", "actual")
# config module result (in the audit record) -> the component its drift belongs to (None: the runtime the result names)
DRIFT_PARTS = (("kubelet_config", "kubelet"), ("runtime_config", None))


def as_int(value):
    """``int(value)``, or None for None, booleans and what is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def drift_from_results(record):
    """Drift from the check-mode config module results (``<part>_drift``, else ``<part>``): what the desired settings would change."""
    out = []
    for part, component in DRIFT_PARTS:
        result = record.get(part + "_drift", record.get(part))
        if not isinstance(result, Mapping) or result.get("failed") or result.get("skipped"):
            continue
        for change in result.get("changes") or []:
            out.append({"component": component or result.get("runtime") or "runtime", "key": change.get("key"),
                        "desired": change.get("after"), "actual": change.get("before")})
    return out


def sorted_drift(items):
    """Drift items with exactly DRIFT_KEYS, sorted; anything that is not a list gives []."""
    if not isinstance(items, list):
        return []
    out = [{key: item.get(key) for key in DRIFT_KEYS} for item in items if isinstance(item, Mapping)]
    return sorted(out, key=lambda d: (str(d["component"]), str(d["key"]), str(d["desired"]), str(d["actual"])))
