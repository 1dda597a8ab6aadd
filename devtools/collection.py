# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make this checkout importable as ``ansible_collections.kubenode.gc``, on request.

Importing this module does nothing but compute ``REPO``.  ``make_importable()``
finds (or makes) a directory holding ``ansible_collections/kubenode/gc`` that
resolves to this checkout, puts it on ``sys.path`` and returns it: a checkout
that already sits at .../ansible_collections/kubenode/gc is used as it is; any
other gets a symlink tree in the temp dir.  The returned directory is also what
ANSIBLE_COLLECTIONS_PATH needs.
"""

import hashlib
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def collections_path():
    """Return a directory whose ansible_collections/kubenode/gc is this checkout (making a symlink tree if needed)."""
    parts = REPO.split(os.sep)
    if parts[-3:] == ["ansible_collections", "kubenode", "gc"] or parts[-3] == "ansible_collections":
        return os.sep.join(parts[:-3])
    tag = hashlib.sha256(REPO.encode()).hexdigest()[:12]
    base = os.path.join(tempfile.gettempdir(), "kubenode-gc-src-%s" % tag)
    link = os.path.join(base, "ansible_collections", "kubenode", "gc")
    if os.path.realpath(link) != REPO:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        tmp = link + ".%d" % os.getpid()
        os.symlink(REPO, tmp)
        os.replace(tmp, link)
    return base


def make_importable():
    """Put ``collections_path()`` on sys.path (once) so ``ansible_collections.kubenode.gc`` imports; return it."""
    path = collections_path()
    if path not in sys.path:
        sys.path.insert(0, path)
    return path
