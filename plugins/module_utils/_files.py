# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Paths resolved safely, and the one atomic file write: I/O, no Ansible, no file format.

kubenode.gc runs as root. A path it writes must not pass through anything another user can change, or that user
could point the write at any file of the node. ``chase`` resolves a path one component at a time, as systemd's
``chase()`` with ``CHASE_SAFE`` does, each step relative to the directory opened at the step before (``openat`` with
``O_NOFOLLOW``), never by the path's text again:

* a directory is trusted when it is root's alone (``problem``: root owns it and group and others have no write bit)
  or root's and sticky, as /tmp (then only an entry's owner may rename or remove it);
* looking a name up in a directory that is not trusted, following a symbolic link another user owns, or taking a file
  another user owns from a directory others may write (/tmp: they put it there) is an *unsafe transition*;
* a write refuses the first unsafe transition with one sentence naming the component and its owner (UnsafePathError)
  and writes nothing; a read goes on and reports each one (``Chased.unsafe``), as the daemons read such files too;
* root's symbolic links are followed (absolute ones from /, relative ones from their directory), ``..`` goes to the
  parent of the directory reached so far (as the kernel does), at most MAX_LINKS links are followed (ELOOP);
* ``strict`` (what root will execute: the gc_timer role's check of its interpreter and code) asks more: every
  component met, the last one included, must be root's alone, and a sticky directory others write is no exception.

``atomic_write`` writes through the directory ``chase`` opened: a temporary file created there (``O_EXCL``,
``O_NOFOLLOW``), fsync, the old file's owner, mode and extended attributes (ACLs, SELinux label) kept, then
``renameat`` within that directory and an fsync of the directory. Nothing between the check and the rename goes by
the path's text, so no one can swap a component in between.
"""

from __future__ import annotations

import errno
import os
import stat

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

MAX_LINKS = 32  # symbolic links followed in one path before ELOOP (systemd's CHASE_SYMLINKS_MAX, later CHASE_MAX)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_LINK = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class PathError(KubenodeGcError):
    """A path cannot be resolved or written as asked (a link to nothing, a loop of links); one sentence naming it."""


class UnsafePathError(PathError):
    """A path to be written passes through a directory or link that is not root's alone; one sentence naming the
    component; ``unsafe`` is that step (an Unsafe), for callers that word it their way."""

    def __init__(self, message, unsafe=None):
        super().__init__(message)
        self.unsafe = unsafe


def owner(uid):
    """``uid 65534 (nobody)``, or ``uid 1234`` when no user has that uid."""
    try:
        import pwd  # pylint: disable=import-outside-toplevel

        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except (ImportError, KeyError):
        return "uid %d" % uid


def problem(st, sticky=False):
    """Why the file, directory or symbolic link of (l)stat ``st`` is not root's alone, or None: root must own it and
    neither its group nor others may write it (a link's own mode is never used). The one rule of who may change what
    root reads, writes and runs. ``sticky``: a sticky directory others write (/tmp) passes, as a directory to look a
    name up in (only an entry's owner may rename or remove it there)."""
    if st.st_uid != 0:
        return "owned by %s, not root" % owner(st.st_uid)
    mode = st.st_mode
    if not mode & 0o022 or stat.S_ISLNK(mode) or (sticky and stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
        return None
    writers = "its group and others" if mode & 0o022 == 0o022 else "its group" if mode & 0o020 else "others"
    return "writable by %s (mode %04o)" % (writers, stat.S_IMODE(mode))


class Unsafe:
    """One unsafe transition: ``component`` (a path), what it is, and why it is not root's alone."""

    def __init__(self, component, kind, why):
        self.component, self.kind, self.why = component, kind, why

    def __str__(self):
        return "%s, %s %s" % (self.component, self.kind, self.why)

    def __eq__(self, other):
        return isinstance(other, Unsafe) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


def unsafe_write(shown, unsafe):
    """The sentence refusing a write of ``shown`` through the unsafe transition ``unsafe``."""
    return "Not writing %s: its path goes through %s, so another user could redirect the write; nothing was written." % (shown, unsafe)


def unsafe_read(shown, unsafe):
    """The warning for a read of ``shown`` through the unsafe transitions ``unsafe`` (a list)."""
    return ("%s is read through %s: another user can change what it holds, so kubenode.gc reports it (the daemons read it too) but "
            "will not write there" % (shown, "; ".join(str(u) for u in unsafe)))


class Chased:
    """A path resolved by ``chase``: the directory reached (``directory``, open at ``dir_fd``), the last component's
    ``name`` in it and its lstat (``st``, None when it does not exist), ``path`` (directory/name), the unsafe
    transitions met on the way (``unsafe``, reads only) and ``link``: the symbolic link the last component was, when it
    was one and was followed (then a missing ``st`` is a link to nothing, and ``name`` the rest of its target from the
    first missing directory). A context manager: leaving it closes ``dir_fd``."""

    def __init__(self, dir_fd, directory, name, st, unsafe, link):
        self.dir_fd, self.directory, self.name, self.st, self.unsafe, self.link = dir_fd, directory, name, st, unsafe, link
        self.path = os.path.join(directory, name) if name else directory

    def close(self):
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _readlink(dir_fd, name):
    """(lstat, target) of the symbolic link ``name`` of ``dir_fd``, read through one descriptor of the link itself."""
    fd = os.open(name, _LINK, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISLNK(st.st_mode):
            raise OSError(errno.EAGAIN, "changed while it was resolved", name)
        try:
            return st, os.readlink("", dir_fd=fd)  # readlinkat(fd, ""): this very link (Linux 2.6.39+)
        except OSError:
            target = os.readlink(name, dir_fd=dir_fd)
            if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino != st.st_ino:
                raise OSError(errno.EAGAIN, "changed while it was resolved", name)
            return st, target
    finally:
        os.close(fd)


def _parts(text):
    return [p for p in text.split("/") if p not in ("", ".")]


def chase(path, write=False, follow=True, mkdir=None, shown=None, strict=False):
    """Resolve ``path`` safely (see the module's docstring); returns a Chased (close it, or use it in a ``with``).

    ``write``: the first unsafe transition raises UnsafePathError naming ``shown`` (default: ``path``); else each is
    recorded in ``unsafe``. ``follow``: a symbolic link as the last component is followed (root's, or any when reading),
    else it is the result itself. ``mkdir``: missing directories on the way are created with that mode (then checked
    like the others); without it a missing directory raises FileNotFoundError naming it. A missing last component is no
    error (``st`` None, ``link`` naming the link when it was the end of one); too many links raise OSError ELOOP.
    ``strict``: each component met (``/``, every directory, link and the last component) must pass ``problem``
    without the sticky exception; an unsafe transition otherwise.
    """
    shown = shown or path
    todo = _parts(path if path.startswith("/") else os.path.join(os.getcwd(), path))
    fd, directory, unsafe, links, link = os.open("/", _DIR), "/", [], 0, None
    try:
        dir_st = os.fstat(fd)
        while True:
            why = problem(dir_st, sticky=not strict) if todo or strict else None  # the directory a name is looked up in
            if why:
                _unsafe(Unsafe(directory, "a directory", why), write, shown, unsafe)
            if not todo:  # the path named a directory (or /): the result is that directory
                return Chased(fd, directory, "", dir_st, unsafe, link)
            name = todo.pop(0)
            if name == "..":
                parent = os.open("..", _DIR, dir_fd=fd)
                os.close(fd)
                fd, directory = parent, os.path.dirname(directory)
                dir_st = os.fstat(fd)
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not todo or link:  # missing, or the last component's link leads to nothing (its target named whole)
                    return Chased(fd, directory, os.path.join(name, *todo), None, unsafe, link)
                if mkdir is None:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.path.join(directory, name))
                try:
                    os.mkdir(name, mkdir, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: checked below like any other
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            component = os.path.join(directory, name)
            if stat.S_ISLNK(st.st_mode) and (todo or follow):
                link_st, target = _readlink(fd, name)
                why = problem(link_st)
                if why:
                    _unsafe(Unsafe(component, "a symbolic link", why), write, shown, unsafe)
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), shown)
                link = link or (None if todo else component)  # the last component's link: what follows is its target
                todo[:0] = _parts(target)
                if target.startswith("/"):
                    os.close(fd)
                    fd, directory = os.open("/", _DIR), "/"
                    dir_st = os.fstat(fd)
                continue
            why = problem(st) if strict else None  # each directory on the way, and the last component
            if why:
                _unsafe(Unsafe(component, _kind(st), why), write, shown, unsafe)
            if not todo:
                if st.st_uid != 0 and dir_st.st_mode & 0o022:  # a sticky directory others write: they may have put it there
                    _unsafe(Unsafe(component, _kind(st), "owned by %s in a directory others may write" % owner(st.st_uid)), write, shown, unsafe)
                return Chased(fd, directory, name, st, unsafe, link)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), component)
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd, directory = child, component
            dir_st = os.fstat(fd)
            if (dir_st.st_dev, dir_st.st_ino) != (st.st_dev, st.st_ino):
                raise OSError(errno.EAGAIN, "changed while it was resolved", component)
    except BaseException:
        os.close(fd)
        raise


def _kind(st):
    return "a directory" if stat.S_ISDIR(st.st_mode) else "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"


def _unsafe(found, write, shown, unsafe):
    if write:
        raise UnsafePathError(unsafe_write(shown, found), found)
    if found not in unsafe:
        unsafe.append(found)


def open_directory(path, mode=None, shown=None, follow=True):
    """A descriptor of the directory ``path``, resolved for writing (chase, UnsafePathError), itself trusted
    (``problem``, sticky or not: UnsafePathError naming it); created with ``mode`` when missing and ``mode`` is given (its
    missing parents too). ``follow`` False: a symbolic link as the last component fails with ELOOP."""
    with chase(path, write=True, mkdir=mode, shown=shown, follow=follow) as found:
        if found.st is None and found.name:
            if mode is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), found.path)
            try:
                os.mkdir(found.name, mode, dir_fd=found.dir_fd)
            except FileExistsError:
                pass
        if not found.name:
            fd, found.dir_fd = found.dir_fd, None
        elif found.st is not None and stat.S_ISLNK(found.st.st_mode):  # not followed (O_DIRECTORY would say ENOTDIR)
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), found.path)
        else:
            fd = os.open(found.name, _DIR, dir_fd=found.dir_fd)
    try:
        why = problem(os.fstat(fd), sticky=True)
        if why:
            unsafe = Unsafe(found.path, "a directory", why)
            raise UnsafePathError(unsafe_write(shown or path, unsafe), unsafe)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_read(path, follow=True, shown=None):
    """(descriptor or None, resolved path, unsafe transitions) of the file ``path``, resolved for reading (chase) and opened
    in the directory reached with O_NOFOLLOW and O_NONBLOCK (a FIFO cannot hang the read): None when it does not exist
    (a link to nothing included). ``follow`` False: a link as the last component fails with ELOOP. Close the descriptor."""
    with chase(path, follow=follow, shown=shown) as found:
        if found.st is None:
            return None, found.path, found.unsafe
        if not found.name:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(found.name, flags, dir_fd=found.dir_fd), found.path, found.unsafe
        except FileNotFoundError:
            return None, found.path, found.unsafe


def _copy_xattrs(src_fd, dst_fd):
    """The extended attributes of one open file onto another (POSIX ACLs, the SELinux label), as shutil.copystat does;
    those the filesystem or the kernel does not allow are left out."""
    try:
        names = os.listxattr(src_fd)
    except (OSError, AttributeError):
        return
    for name in names:
        try:
            os.setxattr(dst_fd, name, os.getxattr(src_fd, name))
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.ENODATA, errno.EINVAL, errno.EACCES):
                raise


def atomic_write(path, text, mode=0o644, keep_owner_mode=True, prefix=None, check=None, before_replace=None, follow=False, mkdir=None):
    """Replace ``path`` with ``text`` (UTF-8) atomically, through the directory ``chase`` opened for writing; returns
    the path written (the end of its links when ``follow``).

    ``follow``: root's symbolic links as the last component are followed and their target replaced (a link to nothing
    is PathError: nothing is created at the end of a link); else a link there is replaced as it is. ``mkdir``: missing
    directories are created with that mode. The temporary file gets the existing file's owner, mode and extended
    attributes when ``keep_owner_mode`` and the file exists, else ``mode`` whatever the umask. ``check(tmp)`` may
    inspect the temporary file (by its path, in the verified directory) and raise; ``before_replace(tmp, target,
    exists)`` runs just before the rename (a backup, a SELinux label). On any failure the temporary file is removed
    and the target left untouched. UnsafePathError when the path is not root's alone; OSError propagates.
    """
    with chase(path, write=True, follow=follow, mkdir=mkdir) as found:
        if found.st is None and found.link:
            raise PathError("%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (path, found.path))
        if not found.name or (found.st is not None and stat.S_ISDIR(found.st.st_mode)):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        dfd, name = found.dir_fd, found.name
        shared = os.fstat(dfd).st_mode & 0o022  # sticky, others write there (else chase refused it)
        tmp, tmp_fd = create_temporary(dfd, prefix or ".%s." % name)
        try:
            with os.fdopen(tmp_fd, "wb") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                existing = _existing(dfd, name)
                if existing and shared and existing[0].st_uid != 0:
                    os.close(existing[1])
                    unsafe = Unsafe(found.path, "a file", "owned by %s in a directory others may write" % owner(existing[0].st_uid))
                    raise UnsafePathError(unsafe_write(path, unsafe), unsafe)
                if existing and keep_owner_mode:
                    st, old = existing
                    try:
                        _copy_xattrs(old, f.fileno())
                    finally:
                        os.close(old)
                    new = os.fstat(f.fileno())
                    if (new.st_uid, new.st_gid) != (st.st_uid, st.st_gid):  # a sandbox without @chown (the gc_timer's) writes root's files
                        os.fchown(f.fileno(), st.st_uid, st.st_gid)
                    os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
                else:
                    if existing:
                        os.close(existing[1])
                    os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            tmp_path = os.path.join(found.directory, tmp)
            if check is not None:
                check(tmp_path)
            if before_replace is not None:
                before_replace(tmp_path, found.path, _lexists(dfd, name))
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            tmp = None
            os.fsync(dfd)
        finally:
            remove_temporary(dfd, tmp)
        return found.path


def create_temporary(dir_fd, prefix):
    """(name, descriptor open for writing) of a new empty file of mode 0600 in ``dir_fd``, named ``prefix<random>.tmp``
    (O_EXCL: never an entry that was there)."""
    while True:
        name = "%s%s.tmp" % (prefix, os.urandom(8).hex())
        try:
            return name, os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue


def remove_temporary(dir_fd, name):
    """Remove the temporary file ``name`` (create_temporary's) of ``dir_fd`` when a write left it (None: it was renamed)."""
    if name is None:
        return
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _lexists(dir_fd, name):
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _existing(dir_fd, name):
    """(fstat, read descriptor) of the regular file ``name`` of ``dir_fd``, or None when there is none (or it is no regular file)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return st, fd
