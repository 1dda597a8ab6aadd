# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 11, item 9: hostile ledgers and lock files."""

import json
import os

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc as igc
from ansible_collections.kubenode.gc.plugins.modules import image_gc

NOW = 1_800_000_000 * 10**9


def _write(tmp_path, data):
    path = tmp_path / "ledger.json"
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return str(path)


def test_random_bytes_fail_in_one_sentence_naming_the_file(tmp_path):
    path = _write(tmp_path, bytes(range(256)) * 4)
    with pytest.raises(_ledger.LedgerError, match=r"^The image ledger %s is not UTF-8 text \(corrupt\); fix or remove it\.$" % path):
        _ledger.load(path, NOW)


@pytest.mark.parametrize("bad", [True, -5, NOW + 365 * 24 * 3600 * 10**9, 1e30, 1.5])
def test_absurd_timestamps_are_dropped_with_a_warning(tmp_path, bad):
    good = {"first_detected": NOW - 10**12, "last_used": NOW - 10**9}
    path = _write(tmp_path, {"version": 1, "created": NOW - 10**13, "images": {"sha256:good": good, "sha256:bad": dict(good, last_used=bad)}})
    warnings = []
    data = _ledger.load(path, NOW, warnings)
    assert data["images"] == {"sha256:good": good}
    assert len(warnings) == 1 and "sha256:bad" in warnings[0] and path in warnings[0]


def test_created_in_the_future_is_clamped(tmp_path):
    path = _write(tmp_path, {"version": 1, "created": NOW * 10, "images": {}})
    warnings = []
    assert _ledger.load(path, NOW, warnings)["created"] == NOW and len(warnings) == 1


def test_string_timestamps_are_still_malformed(tmp_path):
    path = _write(tmp_path, {"version": 1, "created": NOW, "images": {"sha256:x": {"first_detected": "x", "last_used": 1}}})
    with pytest.raises(_ledger.LedgerError, match="malformed record for sha256:x"):
        _ledger.load(path, NOW)


def test_a_symlinked_ledger_or_lock_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    os.symlink(str(target), str(tmp_path / "ledger.json"))
    with pytest.raises(_ledger.LedgerError, match="is a symbolic link"):
        _ledger.load(str(tmp_path / "ledger.json"), NOW)
    os.symlink(str(target), str(tmp_path / "image-gc.lock"))
    with pytest.raises(_ledger.LedgerError, match=r"^The node lock .* is a symbolic link"):
        with _ledger.NodeLock(str(tmp_path / "image-gc.lock"), 0):
            pass
    assert not target.exists()


def test_symlinked_directories_are_refused_and_unsafe_modes_warned(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "link"))
    with pytest.raises(_ledger.LedgerError, match="directory .* is a symbolic link"):
        with _ledger.NodeLock(str(tmp_path / "link" / "x.lock"), 0):
            pass
    os.chmod(real, 0o777)
    warnings = []
    with _ledger.NodeLock(str(real / "x.lock"), 0, warnings=warnings):
        pass
    assert len(warnings) == 1 and "mode 0777" in warnings[0]


def test_relative_ledger_path_is_rejected():
    with pytest.raises(OptionError, match=r"^ledger_path must be an absolute path, got 'ledger.json'\.$"):
        igc.options(params_for(image_gc.ARGUMENT_SPEC, ledger_path="ledger.json"))


def test_the_node_lock_is_per_endpoint_and_overridable(monkeypatch, tmp_path):
    a = _ledger.node_lock_path("unix:///run/containerd/containerd.sock")
    assert a.startswith("/run/kubenode-gc/") and a.endswith(".lock")
    assert a != _ledger.node_lock_path("unix:///run/crio/crio.sock")
    monkeypatch.setenv("KUBENODE_GC_LOCK_DIR", str(tmp_path))
    assert _ledger.node_lock_path("unix:///x.sock").startswith(str(tmp_path) + "/")


def test_every_spelling_of_one_socket_takes_the_same_lock(tmp_path):
    """The lock is keyed by the socket's resolved path: prefix or none, repeated slashes, dot-dot and a linked directory."""
    real = tmp_path / "run" / "containerd"
    real.mkdir(parents=True)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to(tmp_path / "run")
    sock = str(real / "containerd.sock")
    spellings = [
        "unix://" + sock,
        sock,
        "unix:" + sock,
        "unix://" + str(tmp_path) + "//run///containerd/containerd.sock",
        str(tmp_path / "var" / "run" / "containerd" / "containerd.sock"),
        "unix://" + str(tmp_path / "var" / "run" / "containerd" / ".." / "containerd" / "containerd.sock"),
    ]
    assert {_ledger.node_lock_path(s) for s in spellings} == {_ledger.node_lock_path(sock)}
    assert _ledger.node_lock_path(str(real / "other.sock")) != _ledger.node_lock_path(sock)
