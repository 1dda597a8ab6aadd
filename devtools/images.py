# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build small container images offline, as one docker-archive tar.

Every image is busybox-static plus, optionally, a filler layer of random bytes
of a chosen size, a layer of many small files (one inode each, few bytes) and a layer of
this machine's own files (libraries and Python sources from /usr/lib, which compress as
the files of real images do, unlike random bytes).  The busybox layer is byte-identical across images when
``share_base`` is true (so containerd stores it once); otherwise each image
gets its own copy, made unique by a marker file.
"""

import hashlib
import io
import json
import os
import platform
import random
import tarfile

BUSYBOX = os.environ.get("KUBENODE_GC_BUSYBOX", "/bin/busybox")
APPLETS = ("sh", "true", "false", "sleep", "echo", "cat", "ls")


def go_arch():
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}.get(machine, machine)


def _add(tar, name, data=None, mode=0o644, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.linkname = linkname
    if data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def _layer(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for entry in entries:
            _add(tar, **entry)
    return buf.getvalue()


_BUSYBOX_BYTES = None


def base_layer(marker=None):
    """The busybox layer; ``marker`` makes it unique to one image."""
    global _BUSYBOX_BYTES
    if _BUSYBOX_BYTES is None:
        with open(BUSYBOX, "rb") as f:
            _BUSYBOX_BYTES = f.read()
    entries = [
        {"name": "bin", "kind": tarfile.DIRTYPE, "mode": 0o755},
        {"name": "bin/busybox", "data": _BUSYBOX_BYTES, "mode": 0o755},
        {"name": "etc", "kind": tarfile.DIRTYPE, "mode": 0o755},
        {"name": "tmp", "kind": tarfile.DIRTYPE, "mode": 0o1777},
    ]
    entries += [{"name": "bin/" + a, "kind": tarfile.SYMTYPE, "mode": 0o777, "linkname": "busybox"} for a in APPLETS]
    if marker is not None:
        entries.append({"name": "etc/kubenode-image", "data": marker.encode()})
    return _layer(entries)


def filler_layer(size, seed):
    data = random.Random(seed).randbytes(size)
    return _layer([{"name": "data", "kind": tarfile.DIRTYPE, "mode": 0o755}, {"name": "data/fill", "data": data}])


def files_layer(count, seed):
    """A layer of ``count`` small files, unique to ``seed`` (so no two images share it): many inodes, few bytes."""
    entries = [{"name": "many", "kind": tarfile.DIRTYPE, "mode": 0o755}]
    entries += [{"name": "many/f%05d" % n, "data": ("%s %d\n" % (seed, n)).encode()} for n in range(count)]
    return _layer(entries)


HOST_FILES = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/python3", "/usr/lib")


def host_files_layer(size, seed):
    """A layer of this machine's regular files under HOST_FILES, in sorted order, up to ``size`` bytes, plus a marker
    that makes it unique to ``seed``: content that gzip compresses as real images' layers compress."""
    entries, total, seen = [{"name": "host", "kind": tarfile.DIRTYPE, "mode": 0o755}], 0, set()
    for top in HOST_FILES:
        for root, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                if total >= size or path in seen or os.path.islink(path) or not os.path.isfile(path):
                    continue
                seen.add(path)
                with open(path, "rb") as f:
                    data = f.read(size - total)
                entries.append({"name": "host/%06d" % len(entries), "data": data})
                total += len(data)
    entries.append({"name": "host/marker", "data": seed.encode()})
    return _layer(entries)


class ImageSpec:
    """One image to build: its tags, filler size in bytes, whether the busybox base is shared and how many small files it adds."""

    def __init__(self, tags, size=0, share_base=True, entrypoint=None, seed=None, shared_size=0, files=0, host_size=0):
        self.tags = [tags] if isinstance(tags, str) else list(tags)
        self.size = int(size)
        # a second layer of this many random bytes, identical in every image asking for the same size
        self.shared_size = int(shared_size)
        self.share_base = share_base
        self.entrypoint = entrypoint or ["/bin/sh"]
        self.seed = seed if seed is not None else self.tags[0]
        self.files = int(files)  # a layer of this many small files, unique to the image
        self.host_size = int(host_size)  # a layer of this many bytes of the machine's own files, unique to the image


def build_archive(path, specs):
    """Write a docker-archive tar holding every image in ``specs``; return {first tag: config digest}."""
    manifest = []
    written = set()
    ids = {}
    with tarfile.open(path, "w") as out:

        def blob(data):
            digest = hashlib.sha256(data).hexdigest()
            name = digest + "/layer.tar"
            if name not in written:
                _add(out, name, data)
                written.add(name)
            return name, "sha256:" + digest

        for spec in specs:
            layers = [base_layer(None if spec.share_base else "image " + spec.tags[0])]
            if spec.shared_size > 0:
                layers.append(filler_layer(spec.shared_size, "shared-%d" % spec.shared_size))
            if spec.size > 0:
                layers.append(filler_layer(spec.size, spec.seed))
            if spec.files > 0:
                layers.append(files_layer(spec.files, spec.seed))
            if spec.host_size > 0:
                layers.append(host_files_layer(spec.host_size, spec.seed))
            names, diff_ids = zip(*(blob(layer) for layer in layers))
            config = {
                "architecture": go_arch(),
                "os": "linux",
                "created": "2026-01-01T00:00:00Z",
                # the label makes every image's config, hence its id, unique even when its layers are shared
                "config": {"Entrypoint": spec.entrypoint, "Env": ["PATH=/bin"], "WorkingDir": "/", "Labels": {"kubenode.gc/test-image": spec.tags[0]}},
                "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
                "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "kubenode-gc test harness"} for layer in layers],
            }
            config_bytes = json.dumps(config, sort_keys=True).encode()
            config_digest = hashlib.sha256(config_bytes).hexdigest()
            config_name = config_digest + ".json"
            if config_name not in written:
                _add(out, config_name, config_bytes)
                written.add(config_name)
            manifest.append({"Config": config_name, "RepoTags": spec.tags, "Layers": list(names)})
            ids[spec.tags[0]] = "sha256:" + config_digest
        _add(out, "manifest.json", json.dumps(manifest).encode())
    return ids
