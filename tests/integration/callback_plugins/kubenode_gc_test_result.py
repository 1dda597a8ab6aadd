# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The integration tests' way to read a task's result: what ``register`` would store, written as JSON.

tests/integration/conftest.py's ``Ansible.module()`` runs one task and needs its registered result. A second task
copying ``{{ result | to_json }}`` into a file doubled the cost of every module run (the copy module's own executions on
the node: about one CPU second each). This callback writes the result of the play's first task to the file
``KUBENODE_GC_TEST_RESULT`` names, cleaned as the strategy cleans what ``register`` stores (internal keys and the
invocation removed), with the ``failed`` (and ``skipped``) status callbacks receive as the event rather than a key.
"""

from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase
from ansible.vars.clean import module_response_deepcopy, strip_internal_keys

DOCUMENTATION = """
    name: kubenode_gc_test_result
    type: aggregate
    short_description: writes the first task's result as register stores it (kubenode.gc's integration tests)
    description:
      - Writes the result of the first task of the run to the file KUBENODE_GC_TEST_RESULT names.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kubenode_gc_test_result"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.written = False

    def _write(self, result, **status):
        path = os.environ.get("KUBENODE_GC_TEST_RESULT")
        if not path or self.written:
            return
        clean = strip_internal_keys(module_response_deepcopy(dict(result.result)))
        clean.pop("invocation", None)
        clean.update(status)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(clean, f)
        self.written = True

    def v2_runner_on_ok(self, result):
        self._write(result, failed=False)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._write(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._write(result)
