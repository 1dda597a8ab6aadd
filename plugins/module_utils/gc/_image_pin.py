# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One image_pin run: detect the runtime, read its images, pin (containerd labels or the cri-o drop-in), report.

No Ansible here. containerd >= 1.7.3: the ``io.cri-containerd.pinned=pinned`` label on every containerd record
(tag, repo digest, id) of a matching image, through containerd's images API in the ``k8s.io`` namespace, plus
our owner label ``io.kubenode.gc/pinned=true``. cri-o: ``[crio.image] pinned_images`` in a drop-in of the
listening cri-o's ``--config-dir``, then SIGHUP to that process (cri-o reloads pinned_images on SIGHUP).
The decisions are _image_pin_policy's.
"""

from __future__ import annotations

import math
import os
import signal
import time

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _image_pin_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._containerd_images import (
    OWNER_LABEL,
    OWNER_VALUE,
    PINNED_LABEL,
    PINNED_VALUE,
    ContainerdImages,
)
from ansible_collections.kubenode.gc.plugins.module_utils._errors import GcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._files import PathError, atomic_write
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import check_keep_patterns, keep_matcher
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import read_images

try:
    import tomllib as _toml  # Python 3.11+
except ImportError:  # pragma: no cover - older nodes
    try:
        import tomlkit as _toml
    except ImportError:
        _toml = None

CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_CONFIG_DIR = "/etc/crio/crio.conf.d"
DROPIN_NAME = "99-kubenode-gc-pinned.conf"
VERBS = {"pinned": "pin", "unpinned": "unpin"}
SETTLE_SECONDS = 10.0  # how long to wait for the CRI to report what was changed


class PinError(GcError):
    """An image_pin run failed; ``result`` holds what was done before."""


def options(params):
    opts = dict(cri_options(params), images=list(params["images"] or []), exclusive=params["exclusive"],
                crio_dropin=params["crio_dropin"], lock_timeout=params["lock_timeout"])
    try:
        check_keep_patterns(opts["images"])
    except ValueError as exc:
        raise OptionError(str(exc).replace("keep_images", "images", 1))
    if opts["crio_dropin"] and not os.path.isabs(opts["crio_dropin"]):
        raise OptionError("crio_dropin must be an absolute path, got %r." % opts["crio_dropin"])
    if not (math.isfinite(opts["lock_timeout"]) and opts["lock_timeout"] >= 0):
        raise OptionError("lock_timeout must be a finite number of seconds, 0 or more, got %s." % opts["lock_timeout"])
    return opts


def run(client, opts, check_mode=False):
    """Pin the matching images; returns the module result (with ``warnings`` and ``diff``)."""
    version = client.version()
    kind, reason = policy.runtime_kind(version.runtime_name, version.runtime_version)
    result = dict(changed=False, supported=kind is not None, pinned=[], unpinned=[], warnings=[])
    if kind is None:
        result["warnings"].append(reason)
        return result
    if check_mode:
        return _run(kind, client, opts, True, result)
    lock_warnings = []
    with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], what="image_pin", warnings=lock_warnings):
        _run(kind, client, opts, False, result)
    result["warnings"][:0] = lock_warnings
    return result


def _run(kind, client, opts, check_mode, result):
    images = read_images(client)
    match = keep_matcher(opts["images"]) or (lambda img: False)
    if kind == "containerd":
        before, after = _containerd(client, images, match, opts, check_mode, result)
    else:
        before, after = _crio(client, images, match, opts, check_mode, result)
    result["diff"] = dict(before=dict(pinned=sorted(before)), after=dict(pinned=sorted(after)))
    expect = result.pop("_expect", None)
    if not check_mode and result["changed"]:
        _settle(client, result, expect or {})
    return result


def _containerd(client, images, match, opts, check_mode, result):
    api = ContainerdImages(client)
    listed = {r.name: r for r in api.list()}
    records = {name: dict(r.labels) for name, r in listed.items()}
    pin, unpin = policy.plan_containerd(images, records, match, opts["exclusive"], PINNED_LABEL, PINNED_VALUE, OWNER_LABEL, OWNER_VALUE)
    pinned_now = {policy.describe(i) for i in images
                  if i["pinned"] or any(records[n].get(PINNED_LABEL) == PINNED_VALUE for n in policy.record_names(i, records))}
    after = set(pinned_now)
    for img, names in unpin:
        others = [n for n in policy.record_names(img, records) if n not in names and records[n].get(PINNED_LABEL) == PINNED_VALUE]
        if not others:
            after.discard(policy.describe(img))
    after |= {policy.describe(img) for img, _names in pin}
    result["_expect"] = {img["id"]: True for img, _n in pin}
    result["_expect"].update({img["id"]: False for img, _n in unpin if policy.describe(img) not in after})
    for action, plan, labels in (("pinned", pin, {PINNED_LABEL: PINNED_VALUE, OWNER_LABEL: OWNER_VALUE}),
                                 ("unpinned", unpin, {PINNED_LABEL: None, OWNER_LABEL: None})):
        for img, names in plan:
            if not check_mode:
                for name in names:
                    try:
                        api.set_labels(listed[name], labels)
                    except CriError as exc:
                        result["changed"] = bool(result["pinned"] or result["unpinned"] or names.index(name))
                        result.pop("_expect", None)
                        raise PinError("Could not %s %s: %s" % (VERBS[action], policy.describe(img), exc), result=result) from None
            result[action].append(policy.public(img))
            result["changed"] = True
    return pinned_now, after


def _crio_paths(client, opts):
    """(drop-in path, main config path, config dir, pid of the listening cri-o or None): only a trusted listener counts
    (_daemons.runtime_process: root's, from a root-owned executable), for its flags and for the SIGHUP."""
    _runtime, proc = _daemons.runtime_process(client.path)
    pid = proc.pid if proc is not None else None
    config, config_dir = CRIO_CONFIG, CRIO_CONFIG_DIR
    if proc is not None:
        flags = _daemons.runtime_flags("crio", proc.argv[1:], proc.environ, proc)
        config, config_dir = flags.get("config") or config, flags.get("config-dir") or config_dir
    dropin = opts["crio_dropin"] or os.path.join(config_dir, DROPIN_NAME)
    return dropin, config, config_dir, pid


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise PinError("Cannot read %s: %s." % (path, getattr(exc, "strerror", None) or exc))


def _others_pinned(config, config_dir, dropin, warnings):
    """pinned_images as cri-o's other config files set it (the last file that sets it wins), in cri-o's order."""
    files = [config]
    try:
        files += [os.path.join(config_dir, n) for n in sorted(os.listdir(config_dir)) if n.endswith(".conf")]
    except OSError:
        pass
    value = []
    for path in files:
        if os.path.abspath(path) == os.path.abspath(dropin):
            continue
        text = _read(path)
        if text is None:
            continue
        if _toml is None:
            warnings.append("Cannot read pinned_images from %s (no TOML parser on the node); it may be overridden by %s." % (path, dropin))
            continue
        try:
            data = _toml.loads(text)
        except Exception as exc:  # pylint: disable=broad-except
            raise PinError("%s is not valid TOML: %s." % (path, str(exc).rstrip(".")))
        found = ((data.get("crio") or {}).get("image") or {}).get("pinned_images")
        if isinstance(found, list):
            value = [str(v) for v in found]
    return value


def _crio(client, images, match, opts, check_mode, result):
    dropin, config, config_dir, pid = _crio_paths(client, opts)
    current = _read(dropin)
    owned = policy.crio_owned(current)
    others = _others_pinned(config, config_dir, dropin, result["warnings"])
    new_owned, pinned, unpinned = policy.plan_crio(images, match, owned, others, opts["exclusive"])
    text = policy.crio_dropin_text(new_owned, others)
    before = {policy.describe(i) for i in images if i["pinned"]}
    names_after = set(new_owned) | set(others)
    after = {policy.describe(i) for i in images
             if (i["pinned"] and i not in unpinned) or set(policy.crio_names(i)) & names_after}
    result["pinned"] = [policy.public(i) for i in pinned]
    result["unpinned"] = [policy.public(i) for i in unpinned]
    result["crio_dropin"] = dropin
    result["_expect"] = {i["id"]: True for i in pinned}
    result["_expect"].update({i["id"]: False for i in unpinned if policy.describe(i) not in after})
    if text == current or (current is None and not new_owned):
        return before, after
    result["changed"] = True
    if check_mode:
        return before, after
    try:
        atomic_write(dropin, text, mode=0o644)  # refused (PathError) through a directory or link another user owns
    except (OSError, PathError) as exc:
        result["changed"] = False
        result["pinned"], result["unpinned"] = [], []
        result.pop("_expect", None)
        raise PinError(str(exc) if isinstance(exc, PathError) else "Cannot write %s: %s." % (dropin, exc.strerror or exc), result=result)
    if pid is None:
        result.pop("_expect", None)
        raise PinError("Wrote %s but found no cri-o process listening on %s to reload; reload cri-o (systemctl reload crio)." % (dropin, client.path),
                       result=result)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        result.pop("_expect", None)
        raise PinError("Wrote %s but could not send SIGHUP to cri-o (pid %d): %s." % (dropin, pid, exc.strerror or exc), result=result)
    return before, after


def _settle(client, result, expect):
    """Wait until the CRI reports what was changed (containerd applies labels through events, cri-o reloads)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    pause = 0.005  # containerd applies a label within milliseconds: asked again soon, then less often (0.2 s at most)
    while expect:
        state = {i["id"]: i["pinned"] for i in read_images(client)}
        wrong = sorted(i for i, want in expect.items() if i in state and state[i] != want)
        if not wrong:
            return
        if time.monotonic() > deadline:
            result["warnings"].append("The runtime does not yet report the expected pinned state of %s after %g seconds." % (", ".join(wrong), SETTLE_SECONDS))
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


# The module's options (plugins/modules/image_pin.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    images=dict(type="list", elements="str", default=[]),
    exclusive=dict(type="bool", default=False),
    crio_dropin=dict(type="path"),
    lock_timeout=dict(type="float", default=300.0),
)
