# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""containerd/_usage_cache (issue 43): a committed snapshot's size is asked of containerd once and kept on the node, under
its creation time; everything else is asked each run; the file is used only when it is root's alone."""

import os
import types

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _inventory
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _usage_cache as U

NOBODY = 65534
ACTIVE, COMMITTED = 2, 3


class Containerd:
    """snapshots.Usage as containerd answers it (``sizes``), counting the calls."""

    def __init__(self, endpoint, sizes):
        self.cri = types.SimpleNamespace(endpoint=endpoint)
        self.sizes, self.asked = sizes, []

    def usage_async(self, ns, snapshotter, key):
        self.asked.append((ns, snapshotter, key))
        return types.SimpleNamespace(result=lambda: types.SimpleNamespace(size=self.sizes[(ns, snapshotter, key)]))


def inventory(created=1000):
    snaps = {("overlayfs", "sha256:layer"): {"kind": COMMITTED, "created_ns": created, "size": None},
             ("overlayfs", "rw-1"): {"kind": ACTIVE, "created_ns": created, "size": None},
             ("stargz", "sha256:remote"): {"kind": COMMITTED, "created_ns": created, "size": None}}
    return {"k8s.io": {"snapshots": snaps}, "default": {"snapshots": {("native", "base"): {"kind": COMMITTED, "created_ns": 5, "size": None}}}}


def wanted(inv):
    return sorted((ns,) + ref for ns in inv for ref in inv[ns]["snapshots"])


SIZES = {("k8s.io", "overlayfs", "sha256:layer"): 4096, ("k8s.io", "overlayfs", "rw-1"): 10, ("k8s.io", "stargz", "sha256:remote"): 7,
         ("default", "native", "base"): 8192}


def sizes(inv):
    return {(ns,) + ref: s["size"] for ns in inv for ref, s in inv[ns]["snapshots"].items()}


def run(endpoint, inv, answers=None):
    client = Containerd(endpoint, answers or SIZES)
    _inventory.measure(client, inv, wanted(inv))
    return client.asked


def test_a_committed_snapshots_size_is_asked_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBENODE_GC_CACHE_DIR", str(tmp_path / "cache"))
    first, second = inventory(), inventory()
    assert len(run("/run/ctrd.sock", first)) == 4
    assert sizes(first) == SIZES
    # the next run asks only what containerd measures each time: the active snapshot, and the snapshotter not known to store
    assert run("/run/ctrd.sock", second) == [("k8s.io", "overlayfs", "rw-1"), ("k8s.io", "stargz", "sha256:remote")]
    assert sizes(second) == SIZES
    kept = tmp_path / "cache" / U.file_name("/run/ctrd.sock")
    assert os.stat(str(kept)).st_mode & 0o777 == 0o600
    assert U.parse(kept.read_bytes()) == {("k8s.io", "overlayfs", "sha256:layer"): (1000, 4096), ("default", "native", "base"): (5, 8192)}
    before = os.stat(str(kept))
    run("/run/ctrd.sock", inventory())
    assert os.stat(str(kept)).st_mtime_ns == before.st_mtime_ns and os.stat(str(kept)).st_ino == before.st_ino  # nothing changed: not written
    # another runtime socket has its own file
    assert len(run("/run/other.sock", inventory())) == 4


def test_a_snapshot_made_again_is_measured_again_and_a_removed_one_is_forgotten(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBENODE_GC_CACHE_DIR", str(tmp_path / "cache"))
    run("/run/ctrd.sock", inventory())
    again = inventory(created=2000)  # removed and pulled again: the same keys, another creation time
    del again["default"]
    answers = dict(SIZES)
    answers[("k8s.io", "overlayfs", "sha256:layer")] = 5000
    assert run("/run/ctrd.sock", again, answers) == [("k8s.io", "overlayfs", "rw-1"), ("k8s.io", "overlayfs", "sha256:layer"),
                                                     ("k8s.io", "stargz", "sha256:remote")]
    assert again["k8s.io"]["snapshots"][("overlayfs", "sha256:layer")]["size"] == 5000
    kept = (tmp_path / "cache" / U.file_name("/run/ctrd.sock")).read_bytes()
    assert U.parse(kept) == {("k8s.io", "overlayfs", "sha256:layer"): (2000, 5000)}


def test_a_file_root_did_not_keep_alone_is_not_believed(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUBENODE_GC_CACHE_DIR", str(cache))
    run("/run/ctrd.sock", inventory())
    planted = cache / U.file_name("/run/ctrd.sock")
    planted.write_bytes(U.dump({("k8s.io", "overlayfs", "sha256:layer"): (1000, 1), ("default", "native", "base"): (5, 1)}))
    assert sizes_after(inventory())[("k8s.io", "overlayfs", "sha256:layer")] == 1  # root's own file: believed (hence the rules)
    for owner, mode in ((NOBODY, 0o600), (0, 0o666)):
        planted.write_bytes(U.dump({("k8s.io", "overlayfs", "sha256:layer"): (1000, 1), ("default", "native", "base"): (5, 1)}))
        os.chown(str(planted), owner, owner)
        os.chmod(str(planted), mode)
        inv = inventory()
        assert len(run("/run/ctrd.sock", inv)) == 4 and sizes(inv) == SIZES
    os.chown(str(cache), NOBODY, NOBODY)  # a directory another user owns: neither read nor written
    os.unlink(str(planted))
    assert len(run("/run/ctrd.sock", inventory())) == 4 and not planted.exists()
    os.chown(str(cache), 0, 0)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root: no cache
    assert len(run("/run/ctrd.sock", inventory())) == 4 and not planted.exists()


def sizes_after(inv):
    run("/run/ctrd.sock", inv)
    return sizes(inv)


def test_without_a_cache_everything_is_asked():
    inv = inventory()  # KUBENODE_GC_CACHE_DIR=off in the unit tests
    assert len(run("/run/ctrd.sock", inv)) == 4 and sizes(inv) == SIZES


def test_only_well_formed_files_are_read():
    good = U.dump({("k8s.io", "overlayfs", "a"): (1, 2)})
    assert U.parse(good) == {("k8s.io", "overlayfs", "a"): (1, 2)}
    for bad in (b"", b"\xff", b"[]", b'{"format": 2, "snapshots": []}', b'{"format": 1, "snapshots": [["a", "b", "c", 1]]}',
                b'{"format": 1, "snapshots": [["a", "b", "c", 1, true]]}', b'{"format": 1, "snapshots": [["a", "b", "c", 1, -1]]}',
                b'{"format": 1, "snapshots": [["a", "b", 3, 1, 1]]}', b'{"format": 1, "snapshots": [["a", "b", "c", 1.5, 1]]}'):
        assert U.parse(bad) == {}, bad
