# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Image references: their syntax, the normal form runtimes store tags in, and the keep-list patterns of image_gc. Pure."""

from __future__ import annotations

import fnmatch
import functools
import re

# The reference grammar of distribution/reference (domain, path components, tag, digest).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
IMAGE_REF = re.compile(
    r"^(?:(?:%s(?:\.%s)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?/)?%s(?:/%s)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$" % (_LABEL, _LABEL, _COMPONENT, _COMPONENT)
)


def is_image_ref(value):
    """Whether ``value`` is a well-formed image reference (registry.k8s.io/pause:3.10, name@sha256:...)."""
    return bool(IMAGE_REF.match(value))


@functools.lru_cache(maxsize=1 << 16)
def normalize_image_ref(ref):
    """Canonical form of an image reference, as runtimes store tags (docker.io/library/x:latest)."""
    if not ref or ref.startswith("sha256:"):
        return ref
    name, digest = ref, ""
    if "@" in name:
        name, digest = name.split("@", 1)
        digest = "@" + digest
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name + digest


def check_keep_patterns(patterns, option="keep_images", purpose="keep"):
    """Raise ValueError with one sentence when a pattern of ``option`` is empty or a malformed glob (an unclosed ``[``).

    A keep list is a safety net: a pattern that silently matches nothing would protect nothing. The same patterns name
    the images image_gc's mode=listed removes (``option`` images, ``purpose`` remove).
    """
    for pat in patterns or []:
        if not isinstance(pat, str) or not pat.strip():
            raise ValueError("%s must not contain an empty pattern; remove it or name the image to %s." % (option, purpose))
        i = 0
        while i < len(pat):
            if pat[i] == "[":
                j = i + 1
                if j < len(pat) and pat[j] == "!":
                    j += 1
                if j < len(pat) and pat[j] == "]":
                    j += 1
                end = pat.find("]", j)
                if end < 0:
                    raise ValueError("%s pattern %r is not a valid glob: the bracket at position %d is never closed." % (option, pat, i))
                i = end
            i += 1


def patterns_matching(patterns):
    """A function: the patterns (as written, in order) that match an image (full/short id, repo:tag glob, repo digest)."""
    pats = [(p, p.strip()) for p in patterns or [] if p and p.strip()]

    def matching(img):
        hex_id = img["id"].split(":", 1)[-1]
        names = set(img["repo_tags"]) | set(img["repo_digests"])
        names |= {normalize_image_ref(n) for n in names}
        found = []
        for written, pat in pats:
            bare = pat.split(":", 1)[1] if pat.startswith("sha256:") else pat
            if pat == img["id"] or (len(bare) >= 12 and all(c in "0123456789abcdef" for c in bare) and hex_id.startswith(bare)):
                found.append(written)
            elif any(fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(name, normalize_image_ref(pat)) for name in names):
                found.append(written)
        return found

    return matching


def keep_matcher(patterns):
    """A predicate: does an image match any keep pattern (patterns_matching)? None without patterns."""
    if not patterns:
        return None
    matching = patterns_matching(patterns)

    def match(img):
        return bool(matching(img))

    return match


UNTAGGED = "<none>"


def display_ref(repo_tags, repo_digests):
    """repository:tag naming an image in reports: its first tag in sorted order, else the repository of its first digest
    with <none> as tag, else <none>:<none>. Non-text items are ignored."""
    tags = sorted(t for t in repo_tags or [] if isinstance(t, str))
    if tags:
        return tags[0]
    digests = sorted(d for d in repo_digests or [] if isinstance(d, str))
    if digests:
        return digests[0].split("@", 1)[0] + ":" + UNTAGGED
    return UNTAGGED + ":" + UNTAGGED
