# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every kind of storage object disk_usage attributes and storage_gc frees, created for real on a containerd.

Made with the build's own ``ctr`` (fine in tests; the product never runs it) and, where ctr has no
command (adding a resource to a lease), one hand-encoded call of containerd's leases API.
"""

import hashlib
import os
import random
import re
import subprocess
import tempfile
import time

from devtools.images import ImageSpec, build_archive

MIB = 1 << 20
# known sizes of what the scenario creates
SIZES = dict(k8s_image=6 * MIB, moby_image=5 * MIB, default_image=4 * MIB, writable=3 * MIB, log=2 * MIB, ingest=3 * MIB,
             expired_lease=2 * MIB, old_lease=MIB, snapshot=3 * MIB)
LEASE_EXPIRY = 6  # seconds: longer than the expiring lease's own creation takes under load


def ctr(runtime, namespace, *args, stdin=None):
    cmd = [runtime.binary("ctr"), "--address", runtime.socket, "--namespace", namespace] + list(args)
    proc = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
    return proc


def ctr_ok(runtime, namespace, *args, stdin=None):
    proc = ctr(runtime, namespace, *args, stdin=stdin)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout.decode()


def import_into(runtime, namespace, specs):
    fd, path = tempfile.mkstemp(prefix="ns-images-", suffix=".tar", dir=runtime.workdir)
    os.close(fd)
    try:
        build_archive(path, specs)
        ctr_ok(runtime, namespace, "images", "import", "--snapshotter", "overlayfs", path)
    finally:
        os.unlink(path)


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, data):
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def lease_add_content(runtime, namespace, lease_id, digest):
    """leases.AddResource (not in ctr): AddResourceRequest{id=1, resource=2{id=1, type=2}}, hand-encoded."""
    import grpc

    with grpc.insecure_channel(runtime.endpoint) as channel:
        fn = channel.unary_unary("/containerd.services.leases.v1.Leases/AddResource", request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
        request = _field(1, lease_id.encode()) + _field(2, _field(1, digest.encode()) + _field(2, b"content"))
        fn(request, timeout=30, metadata=(("containerd-namespace", namespace),))


def leased_blob(runtime, namespace, lease_id, size, expires):
    """A lease (ctr leases create) holding one blob of ``size`` random bytes that nothing else references."""
    data = random.Random(lease_id).randbytes(size)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    ctr_ok(runtime, namespace, "leases", "create", "--id", lease_id, "--expires", expires)
    lease_add_content(runtime, namespace, lease_id, digest)
    ctr_ok(runtime, namespace, "content", "ingest", "--expected-size", str(size), "--expected-digest", digest, "blob-" + lease_id, stdin=data)
    return digest


def stale_ingest(runtime, namespace, ref, size):
    """An ingest cut off mid-way: ctr content ingest fed fewer bytes than it expects (its commit fails, the ingest stays)."""
    data = random.Random(ref).randbytes(size)
    proc = ctr(runtime, namespace, "content", "ingest", "--expected-size", str(size * 3), "--expected-digest", "sha256:" + "0" * 64, ref, stdin=data)
    assert proc.returncode != 0
    listed = ctr_ok(runtime, namespace, "content", "active")
    assert ref in listed, listed


def kept_snapshot(runtime, namespace, key, size):
    """An active snapshot without parent, kept only by a containerd.io/gc.root label, holding ``size`` bytes."""
    with tempfile.TemporaryDirectory(dir=runtime.workdir) as target:
        out = ctr_ok(runtime, namespace, "snapshots", "prepare", key)
        ctr_ok(runtime, namespace, "snapshots", "label", key, "containerd.io/gc.root=kubenode-gc-test")
        out = ctr_ok(runtime, namespace, "snapshots", "mounts", target, key)
        m = re.search(r"(/\S+/snapshots/\d+/fs)", out)
        assert m, out
        with open(os.path.join(m.group(1), "data"), "wb") as f:
            f.write(random.Random(key).randbytes(size))


def create_all(runtime, logs_dir):
    """Create one object of every kind, measuring each step's bytes with statvfs; return (ids, {step: bytes created})."""
    made, created = {}, {}
    mountpoint = runtime.imagefs_mountpoint

    def step(name, fn, *args):
        before = used_bytes(mountpoint)
        value = fn(*args)
        created[name] = used_bytes(mountpoint) - before
        return value

    step("k8s_image", runtime.import_images, [ImageSpec("registry.k8s.io/storage-k8s:1", size=SIZES["k8s_image"])])
    sandbox = runtime.run_pod("storage", namespace="storage-ns")
    command = ["/bin/sh", "-c", "dd if=/dev/urandom of=/writable bs=1048576 count=%d 2>/dev/null; exec sleep 2147483647"
               % (SIZES["writable"] // MIB)]

    def writer():
        cid = runtime.add_container(sandbox, "writer", "registry.k8s.io/storage-k8s:1", command=command)
        assert wait_writable(runtime, cid, SIZES["writable"]) >= SIZES["writable"]
        return cid

    made["container"] = step("writable", writer)
    made["log_dir"] = os.path.join(logs_dir, "storage-ns_storage_uid-storage-ns-storage")

    def log():
        os.makedirs(os.path.join(made["log_dir"], "writer"), exist_ok=True)
        with open(os.path.join(made["log_dir"], "writer", "0.log"), "wb") as f:
            f.write(random.Random("log").randbytes(SIZES["log"]))

    step("log", log)
    step("moby_image", import_into, runtime, "moby", [ImageSpec("docker.io/library/moby-only:1", size=SIZES["moby_image"], share_base=False)])
    step("default_image", import_into, runtime, "default",
         [ImageSpec("docker.io/library/default-only:1", size=SIZES["default_image"], share_base=False)])
    step("ingest", stale_ingest, runtime, "default", "stale-ingest-1", SIZES["ingest"])
    made["old_lease"] = "old-lease-1"
    step("old_lease", leased_blob, runtime, "default", made["old_lease"], SIZES["old_lease"], "0")
    made["snapshot"] = "kept-snapshot-1"
    step("snapshot", kept_snapshot, runtime, "default", made["snapshot"], SIZES["snapshot"])
    # Last, and with room to spare: containerd's own GC deletes an expired lease whenever a mutation triggers it (every
    # ctr command above deletes a temporary lease), so the lease must expire only after the last mutation.
    made["expired_lease"] = "expired-lease-1"
    start = time.monotonic()
    step("expired_lease", leased_blob, runtime, "default", made["expired_lease"], SIZES["expired_lease"], "%ds" % LEASE_EXPIRY)
    time.sleep(max(0.0, start + LEASE_EXPIRY + 0.5 - time.monotonic()))  # the lease has expired, the ingest is idle > 1 s
    listed = ctr_ok(runtime, "default", "leases", "ls")
    assert made["expired_lease"] in listed, "containerd's GC collected the expired lease before the test looked: %s" % listed
    return made, created


def wait_writable(runtime, cid, want, timeout=30):
    """containerd samples writable layers periodically: wait until ListContainerStats reports at least ``want``."""
    deadline = time.time() + timeout
    while True:
        stats = runtime.client.call("ListContainerStats").stats
        got = [s.writable_layer.used_bytes.value for s in stats if s.attributes.id == cid]
        if got and got[0] >= want:
            return got[0]
        if time.time() > deadline:
            return got[0] if got else None
        time.sleep(0.5)


def used_bytes(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize
