# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""kubenode.gc.image_pin runs through ansible-core's normal action, in a worker that does not re-scan the controller's
objects while it builds the module's payload (plugin_utils/_module_action.py)."""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.plugin_utils._module_action import ModuleAction


class ActionModule(ModuleAction):
    """The normal action for kubenode.gc.image_pin."""
