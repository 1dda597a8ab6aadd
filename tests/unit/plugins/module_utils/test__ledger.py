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


@pytest.fixture
def run_dir(monkeypatch, tmp_path):
    """/run/kubenode-gc, in the test's own directory."""
    path = str(tmp_path / "run" / "kubenode-gc")
    monkeypatch.setattr(_ledger, "LOCK_DIR", path)
    return path


def test_a_lock_directory_that_is_a_link_or_not_roots_alone_is_not_used(tmp_path, run_dir):
    """Issue 39: KUBENODE_GC_LOCK_DIR that is a link, another user's, or writable by others is refused; the lock is
    taken in /run/kubenode-gc instead, with a warning naming why."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "link"))
    cases = [(str(tmp_path / "link"), "it is a symbolic link"),
             (str(real), "its path goes through %s, a directory writable by its group and others (mode 0777)" % real),
             (str(tmp_path / "owned"), "its path goes through %s, a directory owned by uid 65534 (nobody), not root" % (tmp_path / "owned"))]
    (tmp_path / "owned").mkdir()
    os.chown(str(tmp_path / "owned"), 65534, 65534)
    os.chmod(str(real), 0o777)
    for directory, why in cases:
        warnings = []
        with _ledger.NodeLock(os.path.join(directory, "x.lock"), 0, warnings=warnings) as lock:
            assert lock.path == os.path.join(run_dir, "x.lock")
        assert warnings == ["Not using %s for the node lock: %s%s The node lock is taken in %s instead." % (
            directory, why, "; kubenode.gc does not follow links for its lock." if "link" in why else ", so another user could hold, remove or recreate "
            "the lock.", run_dir)]
    assert os.listdir(str(real)) == [] and os.listdir(str(tmp_path / "owned")) == []
    assert oct(os.stat(run_dir).st_mode & 0o7777) == "0o700"


def test_run_kubenode_gc_itself_is_refused_when_not_roots_alone(run_dir):
    os.makedirs(run_dir)
    for owner, mode, why in ((65534, 0o700, "its path goes through %s, a directory owned by uid 65534 (nobody), not root, so another user could hold, "
                                            "remove or recreate the lock." % run_dir),
                             (0, 0o1777, "it is writable by its group and others (mode 1777), so another user could remove or recreate the lock.")):
        os.chown(run_dir, owner, owner)
        os.chmod(run_dir, mode)
        with pytest.raises(_ledger.LedgerError) as err:
            with _ledger.NodeLock(os.path.join(run_dir, "x.lock"), 0):
                pass
        assert str(err.value) == "Not using %s for the node lock: %s" % (run_dir, why)
        assert os.listdir(run_dir) == []


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


def test_a_ledger_path_through_another_users_directory_is_refused_for_a_run_and_warned_for_a_read(tmp_path):
    """Issue 39: check_path refuses it for a run that writes (before anything is removed), warns for check mode; save refuses it."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    path = str(theirs / "ledger.json")
    _ledger.save(path, _ledger.new_ledger(NOW))
    os.chown(str(theirs), 65534, 65534)
    before = open(path, "rb").read()
    with pytest.raises(_ledger.LedgerError) as err:
        _ledger.check_path(path, True, [])
    assert str(err.value) == ("Not using the image ledger %s: its path goes through %s, a directory owned by uid 65534 (nobody), not root, so another "
                              "user could replace it or redirect its write; nothing was removed." % (path, theirs))
    warnings = []
    _ledger.check_path(path, False, warnings)
    assert warnings == ["The image ledger %s is read through %s, a directory owned by uid 65534 (nobody), not root: another user could change the "
                        "records that keep images alive; a run that removes images refuses it." % (path, theirs)]
    assert _ledger.load(path, NOW)["created"] == NOW
    with pytest.raises(_ledger.LedgerError, match="^Cannot write the image ledger %s: its path goes through %s, a directory owned by uid 65534" % (
            path, theirs)):
        _ledger.save(path, _ledger.new_ledger(NOW + 1))
    assert open(path, "rb").read() == before and os.listdir(str(theirs)) == ["ledger.json"]
    _ledger.check_path(str(tmp_path / "new" / "ledger.json"), True, [])  # a directory to make: fine


def test_the_lock_file_cannot_be_removed_or_recreated_by_another_user(monkeypatch):
    """The delete-and-recreate attack: in the 0700 root directory, uid 65534 can neither remove the held lock file nor
    make another one, so a second run waits for the very file the first holds."""
    import shutil  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    parent = tempfile.mkdtemp(prefix="kgc-run-", dir="/tmp")  # 0755 below /tmp: another user reaches the lock directory itself
    os.chmod(parent, 0o755)
    run_dir = os.path.join(parent, "kubenode-gc")
    monkeypatch.setattr(_ledger, "LOCK_DIR", run_dir)
    lock = os.path.join(run_dir, "x.lock")
    attack = "import os, sys\nfor op in (lambda: os.listdir(os.path.dirname(sys.argv[1])), lambda: os.unlink(sys.argv[1]), " \
             "lambda: open(sys.argv[1] + '.new', 'w'), lambda: os.listdir(os.path.dirname(os.path.dirname(sys.argv[1])))):\n" \
             "    try:\n        op()\n        print('done')\n    except OSError as e:\n        print(e.errno)\n"
    try:
        with _ledger.NodeLock(lock, 0):
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", attack, lock],
                                 capture_output=True, text=True, check=True).stdout.split()
            assert out == ["13", "13", "13", "done"]  # EACCES in the lock directory; its parent is readable
            with pytest.raises(_ledger.LedgerError, match="^Another kubenode.gc run holds the node lock %s;" % lock):
                with _ledger.NodeLock(lock, 0):
                    pass
        assert os.listdir(run_dir) == ["x.lock"] and oct(os.stat(run_dir).st_mode & 0o7777) == "0o700"
    finally:
        shutil.rmtree(parent)


def test_a_symlinked_ledger_directory_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    with pytest.raises(_ledger.LedgerError, match="^The ledger directory %s is a symbolic link; kubenode.gc does not follow links for its ledger.$" % (
            tmp_path / "link")):
        _ledger.check_path(str(tmp_path / "link" / "ledger.json"), False, [])
