# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE image_pin decisions: which runtimes can pin, what to pin and unpin, the cri-o drop-in's text.

No I/O, no clock, no Ansible. Images are the records of _snapshot.read_images (id, repo_tags,
repo_digests, pinned).
"""

from __future__ import annotations

import json
import re

# containerd's CRI reports the pinned label as CRI ``pinned`` from 1.7.3 on (KEP-2040)
CONTAINERD_MIN_PIN = (1, 7, 3)
DROPIN_HEADER = "# Managed by kubenode.gc.image_pin; rewritten on every run, do not edit."
OWNED_PREFIX = "# kubenode.gc pins: "


def parse_version(text):
    """(major, minor, patch) of a runtime version such as 1.6.20~ds1, v1.7.24, 2.1.9 or 2 (missing parts are 0), or None.

    The one parser of runtime versions: image_pin and the image-volume check of _snapshot use it."""
    m = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", (text or "").strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def runtime_kind(name, version):
    """``containerd``, ``crio`` or None (cannot pin), and the one-sentence reason when None."""
    lname = (name or "").lower()
    if lname == "containerd":
        parsed = parse_version(version)
        if parsed is None or parsed < CONTAINERD_MIN_PIN:
            return None, ("containerd %s cannot pin images: its CRI reports images pinned only from containerd 1.7.3 on; "
                          "nothing was changed." % version)
        return "containerd", None
    if lname in ("cri-o", "crio"):
        return "crio", None
    if lname == "docker":
        return None, ("Docker Engine %s (through cri-dockerd) cannot pin images: cri-dockerd reports only its sandbox image pinned and has "
                      "no setting for others; nothing was changed." % version)
    return None, "%s %s cannot be pinned by kubenode.gc: only containerd 1.7.3+ and cri-o are supported; nothing was changed." % (name, version)


def public(img):
    return {"id": img["id"], "repo_tags": list(img["repo_tags"])}


def describe(img):
    """How diff mode names an image: its tags, else its id."""
    return ", ".join(img["repo_tags"]) or img["id"]


def record_names(img, records):
    """The containerd image records (names) behind a CRI image: its tags, repo digests and id, those that exist."""
    names = list(img["repo_tags"]) + list(img["repo_digests"]) + [img["id"]]
    return [n for n in dict.fromkeys(names) if n in records]


def plan_containerd(images, records, match, exclusive, pinned_label, pinned_value, owner_label, owner_value):
    """What to label on containerd.

    ``records``: {name: labels} of the containerd image records in the CRI namespace.
    Returns (pin, unpin): lists of (image, [record names]). An image is pinned already when the CRI says
    so or one of its records carries the pinned label; then it is left alone. ``exclusive`` unpins the
    records that carry our owner label, of images that no longer match.
    """
    pin, unpin = [], []
    for img in images:
        names = record_names(img, records)
        if not names:
            continue
        if match(img):
            if not img["pinned"] and not any(records[n].get(pinned_label) == pinned_value for n in names):
                pin.append((img, names))
        elif exclusive:
            ours = [n for n in names if records[n].get(owner_label) == owner_value]
            if ours:
                unpin.append((img, ours))
    return pin, unpin


def crio_names(img):
    """The exact names cri-o matches pinned_images against: the image's tags, else its repo digests."""
    return list(img["repo_tags"]) or list(img["repo_digests"])


def plan_crio(images, match, owned, others, exclusive):
    """What the cri-o drop-in should hold.

    ``owned``: the names our drop-in pinned before; ``others``: the pinned_images of the runtime's other config
    files (which our drop-in would otherwise replace, so it carries them over).
    Returns (new_owned sorted, pinned images, unpinned images). Without ``exclusive`` our earlier pins stay;
    with it, only the names of images that match now (names of images gone from the node are dropped).
    """
    owned = set(owned)
    keep = set() if exclusive else set(owned)
    pinned, unpinned = [], []
    for img in images:
        names = set(crio_names(img))
        if not names:
            continue
        if match(img):
            if names & owned:
                keep |= names
            elif not img["pinned"]:  # an image the runtime pins already (its pause image, others' pins) is not ours
                keep |= names
                pinned.append(img)
        elif exclusive and names & owned:
            unpinned.append(img)
    return sorted(keep), pinned, unpinned


def crio_dropin_text(owned, others):
    """The drop-in: pinned_images = others' + ours (TOML arrays replace, they do not merge); ours in a comment."""
    names = sorted(set(owned) | set(others))
    lines = [DROPIN_HEADER, OWNED_PREFIX + json.dumps(sorted(owned)), "[crio.image]", "pinned_images = ["]
    lines += ["  %s," % json.dumps(n) for n in names]
    lines.append("]")
    return "\n".join(lines) + "\n"


def crio_owned(text):
    """The names a drop-in written by crio_dropin_text records as ours; [] for None or a file without the record."""
    for line in (text or "").splitlines():
        if line.startswith(OWNED_PREFIX):
            try:
                value = json.loads(line[len(OWNED_PREFIX):])
            except ValueError:
                return []
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    return []
