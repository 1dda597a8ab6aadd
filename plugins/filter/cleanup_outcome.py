# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The outcome of kubenode.gc.cleanup over its waves: when the waves stop, which reached nodes still need a history
record, and why the play fails (docs in the sibling YAML files). Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.module_utils.node._cleanup_policy import complete_interrupted, images_seen


def _pairs(value, name):
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("%s expects a list of [record, host] pairs, got %s." % (name, type(value).__name__))
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise AnsibleFilterError("%s expects [record, host] pairs, got %r." % (name, item))
        record, host = item
        out.append((record if isinstance(record, Mapping) else None, str(host)))
    return out


def _failed(record):
    """A host failed when it has no record (it stopped before its summary) or its record's status is failed."""
    return record is None or record.get("status") == "failed"


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def cleanup_wave_stop(value, max_fail_percentage=10):
    """None, or why no more waves run after this one: more than ``max_fail_percentage`` percent of its hosts failed,
    or all of them (Ansible's rule for ``max_fail_percentage``, applied after the summary can still be printed)."""
    pairs = _pairs(value, "cleanup_wave_stop")
    try:
        limit = float(max_fail_percentage)
    except (TypeError, ValueError):
        raise AnsibleFilterError("cleanup_wave_stop expects max_fail_percentage to be a number, got %r." % (max_fail_percentage,)) from None
    if not pairs:
        return None
    failed = [host for record, host in pairs if _failed(record)]
    if not failed or (len(failed) * 100.0 / len(pairs) <= limit and len(failed) < len(pairs)):
        return None
    return ("%s of the wave of %s failed (%s), more than kubenode_gc_cleanup_max_fail_percentage %s%%: no further wave ran."
            % (len(failed), _plural(len(pairs), "node"), ", ".join(failed), ("%g" % limit)))


def cleanup_unrecorded(value):
    """The records of the reached nodes whose history record the wave did not write: a node that could not be cleaned
    (its runtime could not be read, grpcio missing) or that was skipped. Unreachable nodes and nodes the waves never
    reached have none."""
    out = []
    for record, host in _pairs(value, "cleanup_unrecorded"):
        if record is None or record.get("unreachable") or record.get("stopped") or "finished_at" in record:
            continue
        if record.get("status") in ("failed", "skipped"):
            out.append(dict(record, host=record.get("host") or host))
    return out


def cleanup_fail_reason(value, stopped=None):
    """None when every node was cleaned, planned or skipped, else one sentence naming the failed and unreachable nodes
    (and why the waves stopped): the cleanup play fails with it after its summary."""
    pairs = _pairs(value, "cleanup_fail_reason")
    unreachable = [host for record, host in pairs if record is not None and record.get("unreachable")]
    failed = [host for record, host in pairs if _failed(record) and host not in unreachable]
    reasons = []
    if failed:
        reasons.append("%s failed (%s)" % (_plural(len(failed), "node"), ", ".join(failed)))
    if unreachable:
        reasons.append("%s could not be reached (%s)" % (_plural(len(unreachable), "node"), ", ".join(unreachable)))
    if stopped:
        reasons.append("the waves stopped: %s" % str(stopped).rstrip("."))
    if not reasons:
        return None
    return "The cleanup did not succeed on every node: %s." % "; ".join(reasons)


def cleanup_images_seen(images):
    """What a provisional history record keeps of cri_info's images: id, tags and size of each (_cleanup_policy)."""
    if not isinstance(images, (list, tuple)):
        raise AnsibleFilterError("cleanup_images_seen expects cri_info's images list, got %s." % type(images).__name__)
    return images_seen(images)


def cleanup_interrupted(record, images, now=None):
    """The history record of an interrupted run, completed (_cleanup_policy.complete_interrupted, which kubenode.gc.node_cleanup uses)."""
    if not isinstance(record, Mapping):
        raise AnsibleFilterError("cleanup_interrupted expects a history record dict, got %s." % type(record).__name__)
    if not isinstance(images, (list, tuple)):
        raise AnsibleFilterError("cleanup_interrupted expects cri_info's images list, got %s." % type(images).__name__)
    return complete_interrupted(record, images, now)


class FilterModule:
    """kubenode.gc cleanup outcome filters."""

    def filters(self):
        return {"cleanup_wave_stop": cleanup_wave_stop, "cleanup_unrecorded": cleanup_unrecorded, "cleanup_fail_reason": cleanup_fail_reason,
                "cleanup_images_seen": cleanup_images_seen, "cleanup_interrupted": cleanup_interrupted}
