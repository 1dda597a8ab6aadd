# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_files (issue 39): paths resolved as systemd's chase() with CHASE_SAFE, and the atomic write through the verified directory.

Every transition: root's directories and links are followed; another user's directory or link, a directory group or
others may write (not sticky), a file another user owns in a sticky directory others write refuse a write and are
reported by a read. ``..``, relative and absolute links, loops and links to nothing resolve as the kernel resolves them
(os.path.realpath is the reference). The tests run as root and make other users' files with chown.
"""

import errno
import os
import stat

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _files

NOBODY = 65534


def chown(path, uid=NOBODY):
    os.chown(str(path), uid, uid, follow_symlinks=False)


def tree(tmp_path):
    """etc/k/c.yaml (root's), a relative link etc/link -> k/c.yaml, an absolute link etc/abs -> etc/k/c.yaml."""
    (tmp_path / "etc" / "k").mkdir(parents=True)
    (tmp_path / "etc" / "k" / "c.yaml").write_text("old\n")
    (tmp_path / "etc" / "link").symlink_to("k/c.yaml")
    (tmp_path / "etc" / "abs").symlink_to(tmp_path / "etc" / "k" / "c.yaml")
    return tmp_path / "etc" / "k" / "c.yaml"


def resolved(path, **kwargs):
    with _files.chase(str(path), **kwargs) as found:
        return found.path, [str(u) for u in found.unsafe]


def test_roots_links_are_followed_as_the_kernel_does(tmp_path, monkeypatch):
    target = tree(tmp_path)
    (tmp_path / "etc" / "k" / "sub").mkdir()
    (tmp_path / "etc" / "up").symlink_to("k/sub/..")
    (tmp_path / "etc" / "chain").symlink_to("link")
    spellings = ["etc/link", "etc/abs", "etc/chain", "etc//k/./c.yaml", "etc/k/sub/../c.yaml", "etc/up/c.yaml", "etc/k/../link"]
    for rel in spellings:
        path = str(tmp_path / rel)
        assert os.path.realpath(path) == str(target)
        assert resolved(path) == (str(target), [])
    # `..` of a link's target is the parent of where the link points (physical), as the kernel resolves it
    (tmp_path / "etc" / "deep").symlink_to(tmp_path / "etc" / "k" / "sub")
    assert resolved(tmp_path / "etc" / "deep" / ".." / "c.yaml") == (str(target), [])
    # above / stays at /; a relative path starts at the working directory
    assert resolved("/../../" + str(target).lstrip("/")) == (str(target), [])
    monkeypatch.chdir(str(tmp_path / "etc"))
    assert resolved("link") == (str(target), [])
    # the link itself as the result, when not followed
    with _files.chase(str(tmp_path / "etc" / "link"), follow=False) as found:
        assert found.path == str(tmp_path / "etc" / "link") and stat.S_ISLNK(found.st.st_mode)


def test_loops_and_too_many_links_fail_with_eloop(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    for path in (tmp_path / "a", tmp_path / "a" / "x"):
        with pytest.raises(OSError) as err:
            _files.chase(str(path))
        assert err.value.errno == errno.ELOOP
    (tmp_path / "f").write_text("x")
    previous = "f"
    for n in range(_files.MAX_LINKS + 1):
        (tmp_path / ("l%d" % n)).symlink_to(previous)
        previous = "l%d" % n
    assert resolved(tmp_path / ("l%d" % (_files.MAX_LINKS - 1)))[0] == str(tmp_path / "f")  # 32 links: followed
    with pytest.raises(OSError) as err:
        _files.chase(str(tmp_path / ("l%d" % _files.MAX_LINKS)))  # 33
    assert err.value.errno == errno.ELOOP


def test_missing_parts(tmp_path):
    with _files.chase(str(tmp_path / "new.yaml"), write=True) as found:
        assert (found.st, found.link, found.path) == (None, None, str(tmp_path / "new.yaml"))
    with pytest.raises(FileNotFoundError) as err:
        _files.chase(str(tmp_path / "no" / "dir" / "f"))
    assert err.value.filename == str(tmp_path / "no")
    (tmp_path / "dangling").symlink_to("gone")
    with _files.chase(str(tmp_path / "dangling")) as found:
        assert found.st is None and found.link == str(tmp_path / "dangling") and found.path == str(tmp_path / "gone")
    with pytest.raises(_files.PathError) as err:
        _files.atomic_write(str(tmp_path / "dangling"), "x", follow=True)
    assert str(err.value) == "%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (
        tmp_path / "dangling", tmp_path / "gone")
    assert sorted(os.listdir(str(tmp_path))) == ["dangling"]
    (tmp_path / "into-nothing").symlink_to("no/such/dir/f")  # a link into a directory that does not exist is one to nothing too
    with _files.chase(str(tmp_path / "into-nothing")) as found:
        assert found.st is None and found.path == str(tmp_path / "no" / "such" / "dir" / "f")
    with pytest.raises(_files.PathError, match="which does not exist; not creating a file at the end of a link"):
        _files.atomic_write(str(tmp_path / "into-nothing"), "x", follow=True)
    os.unlink(str(tmp_path / "into-nothing"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        _files.chase(str(tmp_path / "file" / "x"))


WRITE = "Not writing %s: its path goes through %s, so another user could redirect the write; nothing was written."


def transitions(tmp_path):
    """(path to write, the step named, the file the step leads to) for each unsafe transition."""
    target = tree(tmp_path)
    cases = []
    user = tmp_path / "user"  # another user's directory, to a root-owned file in it
    user.mkdir()
    (user / "c.yaml").write_text("old\n")
    chown(user)
    cases.append((user / "c.yaml", "%s, a directory owned by uid 65534 (nobody), not root" % user, user / "c.yaml"))
    (tmp_path / "etc" / "theirs").symlink_to("k/c.yaml")  # another user's link in root's directory
    chown(tmp_path / "etc" / "theirs")
    cases.append((tmp_path / "etc" / "theirs", "%s, a symbolic link owned by uid 65534 (nobody), not root" % (tmp_path / "etc" / "theirs"), target))
    (tmp_path / "udir").mkdir()  # root's link inside another user's directory
    (tmp_path / "udir" / "l").symlink_to(target)
    chown(tmp_path / "udir")
    cases.append((tmp_path / "udir" / "l", "%s, a directory owned by uid 65534 (nobody), not root" % (tmp_path / "udir"), target))
    (tmp_path / "lnkdir").symlink_to(tmp_path / "etc" / "k")  # another user's link as a directory of the path
    chown(tmp_path / "lnkdir")
    cases.append((tmp_path / "lnkdir" / "c.yaml", "%s, a symbolic link owned by uid 65534 (nobody), not root" % (tmp_path / "lnkdir"), target))
    (tmp_path / "group").mkdir()  # root's, but its group may write
    (tmp_path / "group" / "c.yaml").write_text("old\n")
    os.chmod(str(tmp_path / "group"), 0o775)
    cases.append((tmp_path / "group" / "c.yaml", "%s, a directory writable by its group (mode 0775)" % (tmp_path / "group"), tmp_path / "group" / "c.yaml"))
    (tmp_path / "world").mkdir()
    (tmp_path / "world" / "c.yaml").write_text("old\n")
    os.chmod(str(tmp_path / "world"), 0o777)
    cases.append((tmp_path / "world" / "c.yaml", "%s, a directory writable by its group and others (mode 0777)" % (tmp_path / "world"),
                  tmp_path / "world" / "c.yaml"))
    (tmp_path / "sticky").mkdir()  # /tmp-like: another user's file in it
    (tmp_path / "sticky" / "c.yaml").write_text("old\n")
    chown(tmp_path / "sticky" / "c.yaml")
    os.chmod(str(tmp_path / "sticky"), 0o1777)
    cases.append((tmp_path / "sticky" / "c.yaml", "%s, a file owned by uid 65534 (nobody) in a directory others may write" % (tmp_path / "sticky" / "c.yaml"),
                  tmp_path / "sticky" / "c.yaml"))
    return cases


def snapshot(root):
    out = {}
    for base, _dirs, names in os.walk(str(root)):
        for name in names:
            path = os.path.join(base, name)
            out[path] = os.readlink(path) if os.path.islink(path) else open(path, "rb").read()
    return out


def test_every_unsafe_transition_refuses_a_write_and_is_reported_by_a_read(tmp_path):
    for path, step, leads_to in transitions(tmp_path):
        before = snapshot(tmp_path)
        with pytest.raises(_files.UnsafePathError) as err:
            _files.atomic_write(str(path), "new\n", follow=True)
        assert str(err.value) == WRITE % (path, step) and str(err.value.unsafe) == step
        assert snapshot(tmp_path) == before  # nothing written, no temporary file left
        with pytest.raises(_files.UnsafePathError):
            _files.chase(str(path), write=True)
        assert resolved(path) == (str(leads_to), [step])  # a read resolves it, and says why it is not root's alone
        fd, where, unsafe = _files.open_read(str(path))
        with os.fdopen(fd, "rb") as f:
            assert f.read() == b"old\n" and where == str(leads_to) and [str(u) for u in unsafe] == [step]


def test_safe_transitions(tmp_path):
    """Root's links, a sticky directory others write (/tmp) on the way, a root-owned file in it, and a file of another
    user in root's own directory (root put it there) are written."""
    target = tree(tmp_path)
    (tmp_path / "tmp").mkdir()
    os.chmod(str(tmp_path / "tmp"), 0o1777)
    (tmp_path / "tmp" / "root").mkdir(mode=0o700)
    (tmp_path / "tmp" / "root" / "f").write_text("old\n")
    (tmp_path / "tmp" / "mine").write_text("old\n")
    (tmp_path / "etc" / "k" / "theirs.yaml").write_text("old\n")
    chown(tmp_path / "etc" / "k" / "theirs.yaml")
    for path in (tmp_path / "etc" / "link", tmp_path / "etc" / "abs", tmp_path / "tmp" / "root" / "f", tmp_path / "tmp" / "mine",
                 tmp_path / "etc" / "k" / "theirs.yaml"):
        assert resolved(path)[1] == []
        written = _files.atomic_write(str(path), "new\n", follow=True)
        assert open(written).read() == "new\n"
    assert target.read_text() == "new\n" and os.readlink(str(tmp_path / "etc" / "link")) == "k/c.yaml"
    assert os.stat(str(tmp_path / "etc" / "k" / "theirs.yaml")).st_uid == NOBODY  # its owner kept


def test_strict_asks_every_component_the_last_one_included_to_be_roots_alone(tmp_path):
    """``strict`` (what root runs: the gc_timer role's check): a sticky directory others write on the way, a file its
    group may write and another user's file in root's own directory are unsafe too; root's links and 0755 directories
    pass. The same rule (``problem``) without the sticky exception."""
    target = tree(tmp_path)
    (tmp_path / "tmp").mkdir()
    os.chmod(str(tmp_path / "tmp"), 0o1777)
    (tmp_path / "tmp" / "root").mkdir(mode=0o755)
    (tmp_path / "tmp" / "root" / "f").write_text("old\n")
    (tmp_path / "etc" / "k" / "group.yaml").write_text("old\n")
    os.chmod(str(tmp_path / "etc" / "k" / "group.yaml"), 0o664)
    (tmp_path / "etc" / "k" / "theirs.yaml").write_text("old\n")
    chown(tmp_path / "etc" / "k" / "theirs.yaml")
    cases = [(tmp_path / "etc" / "link", str(target), None),
             (tmp_path / "tmp" / "root" / "f", str(tmp_path / "tmp" / "root" / "f"),
              "%s, a directory writable by its group and others (mode 1777)" % (tmp_path / "tmp")),
             (tmp_path / "etc" / "k" / "group.yaml", None, "%s, a file writable by its group (mode 0664)" % (tmp_path / "etc" / "k" / "group.yaml")),
             (tmp_path / "etc" / "k" / "theirs.yaml", None,
              "%s, a file owned by uid 65534 (nobody), not root" % (tmp_path / "etc" / "k" / "theirs.yaml"))]
    for path, leads_to, step in cases:
        assert resolved(path)[1] == []  # for a write, each is safe
        where, unsafe = resolved(path, strict=True)
        assert where == (leads_to or str(path)) and [u for u in unsafe if u.startswith(str(tmp_path))] == ([step] if step else [])
        if step:
            with pytest.raises(_files.UnsafePathError) as err:
                _files.chase(str(path), write=True, strict=True)
            assert str(err.value.unsafe) == step or not str(err.value.unsafe).startswith(str(tmp_path))  # or one above tmp_path (/tmp)
    assert _files.problem(os.lstat(str(tmp_path / "tmp")), sticky=True) is None
    assert _files.problem(os.lstat(str(tmp_path / "tmp"))) == "writable by its group and others (mode 1777)"


def test_a_read_reports_each_unsafe_step_once(tmp_path):
    target = tree(tmp_path)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "l1").symlink_to("l2")
    (tmp_path / "user" / "l2").symlink_to(target)
    for p in ("user", "user/l1", "user/l2"):
        chown(tmp_path / p)
    assert resolved(tmp_path / "user" / "l1") == (str(target), [
        "%s, a directory owned by uid 65534 (nobody), not root" % (tmp_path / "user"),
        "%s, a symbolic link owned by uid 65534 (nobody), not root" % (tmp_path / "user" / "l1"),
        "%s, a symbolic link owned by uid 65534 (nobody), not root" % (tmp_path / "user" / "l2")])
    assert _files.unsafe_read("/x", [_files.Unsafe("/u", "a directory", "owned by uid 65534 (nobody), not root")]) == (
        "/x is read through /u, a directory owned by uid 65534 (nobody), not root: another user can change what it holds, so kubenode.gc "
        "reports it (the daemons read it too) but will not write there")


def test_the_write_goes_through_the_verified_directory(tmp_path):
    """Between the check and the rename, the directory is moved away and a link to another directory put in its place:
    the file lands in the directory that was checked (renameat on its descriptor), the link's target is untouched."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "c.yaml").write_text("old\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.yaml").write_text("precious\n")

    def swap(tmp):
        assert os.path.dirname(tmp) == str(tmp_path / "conf")
        os.rename(str(tmp_path / "conf"), str(tmp_path / "moved"))
        (tmp_path / "conf").symlink_to(tmp_path / "elsewhere")

    _files.atomic_write(str(tmp_path / "conf" / "c.yaml"), "new\n", check=swap)
    assert (tmp_path / "moved" / "c.yaml").read_text() == "new\n"
    assert (tmp_path / "elsewhere" / "c.yaml").read_text() == "precious\n" and os.listdir(str(tmp_path / "elsewhere")) == ["c.yaml"]


def test_atomic_write_keeps_owner_mode_and_attributes_and_cleans_up(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("old\n")
    os.chmod(str(path), 0o640)
    os.chown(str(path), 0, NOBODY)
    try:
        os.setxattr(str(path), "user.kubenode", b"kept")
        xattr = True
    except OSError:
        xattr = False  # the filesystem has no user attributes
    _files.atomic_write(str(path), "new\n")
    st = os.stat(str(path))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, path.read_text()) == (0o640, 0, NOBODY, "new\n")
    if xattr:
        assert os.getxattr(str(path), "user.kubenode") == b"kept"
    old = os.umask(0o077)
    try:
        _files.atomic_write(str(tmp_path / "d" / "new.json"), "{}", mode=0o644, mkdir=0o700)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(str(tmp_path / "d" / "new.json")).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(tmp_path / "d")).st_mode) == 0o700

    def refuse(tmp):
        raise ValueError("no")

    with pytest.raises(ValueError):
        _files.atomic_write(str(path), "other\n", check=refuse)
    assert path.read_text() == "new\n" and sorted(os.listdir(str(tmp_path))) == ["c.yaml", "d"]
    # a link as the last component, not followed: replaced as it is
    (tmp_path / "l").symlink_to("c.yaml")
    _files.atomic_write(str(tmp_path / "l"), "own\n")
    assert not os.path.islink(str(tmp_path / "l")) and path.read_text() == "new\n"


def test_keeping_roots_own_owner_needs_no_chown(tmp_path, monkeypatch):
    """The gc_timer's sandbox refuses every chown system call (@privileged holds @chown; EPERM): a file root owns is
    replaced keeping its owner and mode without one; another owner is still given back (here, outside a sandbox)."""
    path = tmp_path / "c.yaml"
    path.write_text("old\n")
    os.chmod(str(path), 0o640)
    calls = []
    real = os.fchown

    def fchown(fd, uid, gid):
        calls.append((uid, gid))
        if (uid, gid) == (0, 0):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))  # what the seccomp filter answers
        return real(fd, uid, gid)

    monkeypatch.setattr(_files.os, "fchown", fchown)
    _files.atomic_write(str(path), "new\n")
    st = os.stat(str(path))
    assert (calls, st.st_uid, stat.S_IMODE(st.st_mode), path.read_text()) == ([], 0, 0o640, "new\n")
    os.chown(str(path), 0, NOBODY)
    _files.atomic_write(str(path), "newer\n")
    assert calls == [(0, NOBODY)] and os.stat(str(path)).st_gid == NOBODY


def test_open_directory(tmp_path):
    (tmp_path / "theirs").mkdir()
    chown(tmp_path / "theirs")
    with pytest.raises(_files.UnsafePathError) as err:
        _files.open_directory(str(tmp_path / "theirs"))
    assert str(err.value.unsafe) == "%s, a directory owned by uid 65534 (nobody), not root" % (tmp_path / "theirs")
    fd = _files.open_directory(str(tmp_path / "a" / "b"), mode=0o700)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(str(tmp_path / "a" / "b")))
    finally:
        os.close(fd)
    (tmp_path / "l").symlink_to("a")
    with pytest.raises(OSError) as exc:
        _files.open_directory(str(tmp_path / "l"), follow=False)
    assert exc.value.errno == errno.ELOOP
