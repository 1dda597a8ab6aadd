# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The toml_value filter: one value as TOML, for the roles' configuration templates (docs in toml_value.yml)."""

from __future__ import annotations

import json
import math
import re

from ansible.errors import AnsibleFilterError

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key):
    key = str(key)
    return key if _BARE_KEY.match(key) else json.dumps(key)


def toml_value(value):
    """Render a string, boolean, number, list or mapping as a TOML value (mappings as inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise AnsibleFilterError("toml_value cannot render %r: TOML has nan and inf, configuration files should not." % value)
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join("%s = %s" % (_key(k), toml_value(v)) for k, v in value.items()) + "}" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise AnsibleFilterError("toml_value cannot render a %s as TOML." % type(value).__name__)


class FilterModule:
    def filters(self):
        return {"toml_value": toml_value}
