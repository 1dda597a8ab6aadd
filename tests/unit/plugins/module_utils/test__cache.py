# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_cache (issue 43): the node's cache directory is used only when it and each file are root's alone, and only by root.

The tests run as root and make other users' directories and files with chown, as an unprivileged user would have made
them first."""

import os
import stat

from ansible_collections.kubenode.gc.plugins.module_utils import _cache

NOBODY = 65534


def env(path):
    return {_cache.CACHE_DIR_ENV: str(path)}


def opened(path):
    fd = _cache.directory(env(path))
    if fd is not None:
        os.close(fd)
    return fd is not None


def test_the_directory_is_made_root_only_and_files_are_replaced_atomically(tmp_path):
    where = tmp_path / "cache" / "kubenode-gc"
    fd = _cache.directory(env(where))
    try:
        st = os.stat(str(where))
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0
        assert _cache.read(fd, "entry") is None
        assert _cache.write(fd, "entry", b"first") and _cache.write(fd, "entry", b"second")
        assert _cache.read(fd, "entry") == b"second"
        assert os.listdir(str(where)) == ["entry"]  # no temporary file left
        assert stat.S_IMODE(os.stat(str(where / "entry")).st_mode) == 0o600
    finally:
        os.close(fd)


def test_off_and_the_default(tmp_path):
    assert _cache.path({}) == _cache.CACHE_DIR == "/var/cache/kubenode-gc"
    assert _cache.path({_cache.CACHE_DIR_ENV: "Off"}) is None and _cache.directory({_cache.CACHE_DIR_ENV: "off"}) is None
    assert _cache.path(env(tmp_path)) == str(tmp_path)


def test_only_root_uses_it(tmp_path, monkeypatch):
    assert opened(tmp_path / "c")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert not opened(tmp_path / "c")


def test_a_directory_another_user_could_change_is_no_cache(tmp_path):
    owned = tmp_path / "owned"
    owned.mkdir(mode=0o700)
    os.chown(str(owned), NOBODY, NOBODY)
    assert not opened(owned)
    assert not opened(owned / "inside")  # nor anything made in it
    assert not os.path.exists(str(owned / "inside"))
    for mode in (0o770, 0o777, 0o1777):  # group or others write it, sticky or not
        shared = tmp_path / ("mode%o" % mode)
        shared.mkdir()
        os.chmod(str(shared), mode)
        assert not opened(shared), oct(mode)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert not opened(link)  # the directory itself is never reached through a link
    assert opened(real)


def test_a_file_another_user_could_have_written_is_not_read(tmp_path):
    where = tmp_path / "c"
    fd = _cache.directory(env(where))
    try:
        (where / "theirs").write_bytes(b"planted")
        os.chown(str(where / "theirs"), NOBODY, NOBODY)
        (where / "shared").write_bytes(b"planted")
        os.chmod(str(where / "shared"), 0o666)
        (where / "good").write_bytes(b"kept")
        (where / "link").symlink_to(where / "good")
        os.mkfifo(str(where / "fifo"))
        with open(str(where / "huge"), "wb") as f:
            f.truncate(_cache.MAX_BYTES + 1)
        assert [_cache.read(fd, n) for n in ("theirs", "shared", "link", "fifo", "huge", "missing")] == [None] * 6
        assert _cache.read(fd, "good") == b"kept"
        assert not _cache.write(fd, "huge", b"x" * (_cache.MAX_BYTES + 1))
    finally:
        os.close(fd)


def test_a_directory_that_cannot_be_made_is_no_cache_and_no_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    assert not opened(tmp_path / "file" / "kubenode-gc")  # ENOTDIR, as EROFS on a read-only /var
    # missing parents are made as the directory is, root's and 0700
    assert opened(tmp_path / "missing-parent" / "kubenode-gc")
    assert stat.S_IMODE(os.stat(str(tmp_path / "missing-parent")).st_mode) == 0o700
