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
    lease_add(runtime, namespace, lease_id, digest, "content")


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

    step("k8s_image", runtime.pull_images, [ImageSpec("registry.k8s.io/storage-k8s:1", size=SIZES["k8s_image"])])
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


# -- the collector's fixtures: one object of every label kind ------------------------------------------------------

GC_ROOT = "containerd.io/gc.root"


def snapshot_dir(runtime, namespace, key, snapshotter="overlayfs"):
    """The writable directory of an active snapshot, from ``ctr snapshots mounts``."""
    out = ctr_ok(runtime, namespace, "snapshots", "--snapshotter", snapshotter, "mounts", "/unused-target", key)
    m = re.search(r"upperdir=([^,\s]+)", out) or re.search(r"-t bind (/\S+)", out)
    assert m, out
    return m.group(1)


def write_snapshot(runtime, namespace, key, size, parent=None, snapshotter="overlayfs", commit=None):
    """``ctr snapshots prepare`` (ctr labels it gc.root) with ``size`` random bytes, then ``commit`` under that name when given."""
    ctr_ok(runtime, namespace, "snapshots", "--snapshotter", snapshotter, "prepare", key, *([parent] if parent else []))
    with open(os.path.join(snapshot_dir(runtime, namespace, key, snapshotter), "data"), "wb") as f:
        f.write(random.Random(namespace + key).randbytes(size))
    if commit:
        ctr_ok(runtime, namespace, "snapshots", "--snapshotter", snapshotter, "commit", commit, key)
    return commit or key


def label_snapshot(runtime, namespace, key, *labels, snapshotter="overlayfs"):
    ctr_ok(runtime, namespace, "snapshots", "--snapshotter", snapshotter, "label", key, *labels)


def chain(runtime, namespace, prefix, size):
    """Two committed snapshots <prefix>-base <- <prefix>-top, each ``size`` bytes, still gc.root (ctr's label)."""
    base = write_snapshot(runtime, namespace, prefix + "-a", size, commit=prefix + "-base")
    return base, write_snapshot(runtime, namespace, prefix + "-b", size, parent=base, commit=prefix + "-top")


def held_blob(runtime, namespace, hold, name, size, *labels):
    """A blob of ``size`` random bytes, held by lease ``hold`` while it is made, with ``labels``; its digest."""
    data = random.Random(namespace + name).randbytes(size)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    lease_add_content(runtime, namespace, hold, digest)
    ctr_ok(runtime, namespace, "content", "ingest", "--expected-size", str(size), "--expected-digest", digest, "blob-" + name, stdin=data)
    if labels:
        ctr_ok(runtime, namespace, "content", "label", digest, *labels)
    return digest


def lease_add(runtime, namespace, lease_id, rid, rtype):
    """leases.AddResource (not in ctr) of any resource type (content, snapshots/<snapshotter>, ingests):
    AddResourceRequest{id=1, resource=2{id=1, type=2}}, hand-encoded."""
    import grpc

    with grpc.insecure_channel(runtime.endpoint) as channel:
        fn = channel.unary_unary("/containerd.services.leases.v1.Leases/AddResource", request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
        request = _field(1, lease_id.encode()) + _field(2, _field(1, rid.encode()) + _field(2, rtype.encode()))
        fn(request, timeout=30, metadata=(("containerd-namespace", namespace),))


def create_gc_fixtures(runtime, size=MIB):
    """Objects of every kind containerd's collector follows, outside k8s.io; returns their names.

    gc-tools (never listed): a ctr-made gc.root snapshot on overlayfs and one on native; a chain kept only by an image
    record's own gc.ref.snapshot label; a chain kept by a gc.root blob's label; a ctr container (its snapshot, and a blob
    its gc.ref.content label names); a flat lease holding a blob (whose gc.ref.content label it does not follow) and a
    chain's top (whose parent it keeps); a plain lease holding a blob that names another. gc-drop (listed): an image
    whose record labels name a chain and a blob. Every gc.root that ctr sets on the chains is removed once what keeps
    them is in place; the last step runs containerd's collection, so what none of it keeps is gone when this returns."""
    t, d = "gc-tools", "gc-drop"
    names = {}
    for ns in (t, d):
        ctr_ok(runtime, ns, "leases", "create", "--id", "fixture-hold", "-x", "0")
    # gc.root snapshots, made by ctr
    names["root_snapshot"] = write_snapshot(runtime, t, "tool-rw", 2 * size)
    names["native_snapshot"] = write_snapshot(runtime, t, "native-rw", 2 * size, snapshotter="native")
    # an image record of an unlisted namespace whose own labels keep a chain
    import_into(runtime, t, [ImageSpec("docker.io/library/gc-kept:1", size=size, share_base=False)])
    base, top = chain(runtime, t, "img-chain", size)
    ctr_ok(runtime, t, "images", "label", "docker.io/library/gc-kept:1", "containerd.io/gc.ref.snapshot.overlayfs/extra=" + top)
    names["image_chain"] = [base, top]
    # a gc.root blob whose label keeps a chain
    base2, top2 = chain(runtime, t, "blob-chain", size)
    names["root_blob"] = held_blob(runtime, t, "fixture-hold", "root-blob", size // 4, GC_ROOT + "=tool",
                                   "containerd.io/gc.ref.snapshot.overlayfs/x=" + top2)
    names["blob_chain"] = [base2, top2]
    # a container outside the CRI: its snapshot and the blob its label names
    names["container_blob"] = held_blob(runtime, t, "fixture-hold", "container-blob", size // 2)
    ctr_ok(runtime, t, "containers", "create", "--snapshotter", "overlayfs", "--label",
           "containerd.io/gc.ref.content.extra=" + names["container_blob"], "docker.io/library/gc-kept:1", "tool-ctr")
    # a flat lease: the blob it names stays, the blob that one's label names goes; the chain's top keeps its parent
    ctr_ok(runtime, t, "leases", "create", "--id", "flat-lease", "-x", "0", "containerd.io/gc.flat=true")
    names["flat_dropped"] = held_blob(runtime, t, "fixture-hold", "flat-dropped", size // 4)
    names["flat_kept"] = held_blob(runtime, t, "flat-lease", "flat-kept", size // 4, "containerd.io/gc.ref.content=" + names["flat_dropped"])
    base3, top3 = chain(runtime, t, "flat-chain", size)
    lease_add(runtime, t, "flat-lease", top3, "snapshots/overlayfs")
    names["flat_chain"] = [base3, top3]
    # a lease (no expiry, not flat): the blob it names and the blob that one's label names stay while it lives
    ctr_ok(runtime, t, "leases", "create", "--id", "plain-lease", "-x", "0")
    names["plain_referenced"] = held_blob(runtime, t, "fixture-hold", "plain-referenced", size // 4)
    names["plain_held"] = held_blob(runtime, t, "plain-lease", "plain-held", size // 4, "containerd.io/gc.ref.content.x=" + names["plain_referenced"])
    # an image of a listed namespace whose record labels name a chain and a blob: both go with the record
    import_into(runtime, d, [ImageSpec("docker.io/library/gc-drop:1", size=size, share_base=False)])
    base4, top4 = chain(runtime, d, "drop-chain", size)
    names["drop_blob"] = held_blob(runtime, d, "fixture-hold", "drop-blob", size // 2)
    ctr_ok(runtime, d, "images", "label", "docker.io/library/gc-drop:1", "containerd.io/gc.ref.snapshot.overlayfs=" + top4,
           "containerd.io/gc.ref.content.extra=" + names["drop_blob"])
    names["drop_chain"] = [base4, top4]
    # what keeps the chains is in place: their gc.root labels go (an empty value removes a label)
    for ns, snaps in ((t, [base, top, base2, top2, base3, top3]), (d, [base4, top4])):
        for key in snaps:
            label_snapshot(runtime, ns, key, GC_ROOT + "=")
    for ns in (t, d):
        ctr_ok(runtime, ns, "leases", "rm", "--sync", "fixture-hold")  # --sync: containerd's collection has run
    return names


def namespaces(runtime):
    return ctr_ok(runtime, "default", "namespaces", "ls", "-q").split()


def listing(runtime, namespaces):
    """Every object of the namespaces as ctr lists it: {(kind, namespace, id)}; snapshots as "<snapshotter>/<key>"."""
    out = set()
    for ns in namespaces:
        out.update(("content", ns, line.split()[0]) for line in ctr_ok(runtime, ns, "content", "ls", "-q").splitlines() if line.strip())
        out.update(("image", ns, name) for name in ctr_ok(runtime, ns, "images", "ls", "-q").split())
        out.update(("lease", ns, line.split()[0]) for line in ctr_ok(runtime, ns, "leases", "ls").splitlines()[1:])
        out.update(("ingest", ns, line.split()[0]) for line in ctr_ok(runtime, ns, "content", "active").splitlines()[1:])
        for snapshotter in ("overlayfs", "native"):
            out.update(("snapshot", ns, "%s/%s" % (snapshotter, line.split()[0]))
                       for line in ctr_ok(runtime, ns, "snapshots", "--snapshotter", snapshotter, "ls").splitlines()[1:])
    return out


def plan_objects(plan, kinds):
    """The plan's objects of ``kinds`` as ``listing`` names them (a gc_root step as the blob or snapshot it releases)."""
    out = set()
    for s in plan:
        if s["kind"] in kinds:
            kind = s["kind"] if s["kind"] != "gc_root" else ("snapshot" if s.get("snapshotter") else "content")
            out.add((kind, s["namespace"], "%s/%s" % (s["snapshotter"], s["id"]) if kind == "snapshot" else s["id"]))
    return out
