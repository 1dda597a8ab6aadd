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

from devtools.images import ImageSpec, build_archive, go_arch

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


def _number(number, value):
    return _varint(number << 3) + _varint(value)


def _grpc(runtime, method, request, namespace, lease=None, stream=False, timeout=30):
    """One call of containerd's API with a hand-encoded request (raw bytes); ``lease``: the call runs in that lease, as a
    client's leases.WithLease context sends it (the containerd-lease header)."""
    import grpc

    metadata = (("containerd-namespace", namespace),) + ((("containerd-lease", lease),) if lease else ())
    with grpc.insecure_channel(runtime.endpoint) as channel:
        if stream:
            fn = channel.stream_stream(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
            return list(fn(iter([request]), timeout=timeout, metadata=metadata))
        fn = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        return fn(request, timeout=timeout, metadata=metadata)


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
    """leases.AddResource (not in ctr) of any resource type (content, snapshots/<snapshotter>, ingests, images):
    AddResourceRequest{id=1, resource=2{id=1, type=2}}, hand-encoded."""
    request = _field(1, lease_id.encode()) + _field(2, _field(1, rid.encode()) + _field(2, rtype.encode()))
    _grpc(runtime, "/containerd.services.leases.v1.Leases/AddResource", request, namespace)


def leased_ingest(runtime, namespace, lease_id, ref, size):
    """An ingest opened in lease ``lease_id`` and cut off mid-way, as a pull leaves one: content.Write (a stream of one
    WriteContentRequest{action=1 WRITE, ref=2, total=3, expected=4, offset=5, data=6}) with the lease header, closed
    without a commit. containerd adds it to the lease and writes it no expiry of its own."""
    data = random.Random(namespace + ref).randbytes(size)
    expected = "sha256:" + hashlib.sha256(data * 3).hexdigest()
    request = _number(1, 1) + _field(2, ref.encode()) + _number(3, 3 * size) + _field(4, expected.encode()) + _number(5, 0) + _field(6, data)
    _grpc(runtime, "/containerd.services.content.v1.Content/Write", request, namespace, lease=lease_id, stream=True)
    assert ref in ctr_ok(runtime, namespace, "content", "active")


def transfer_pull(runtime, namespace, reference, extra=(), snapshotter="overlayfs"):
    """Pull ``reference`` through containerd's transfer service (2.x) from the harness's registry (the runtime's registry
    hosts directory mirrors its host there), storing it under ``extra`` names too, and unpack it:
    Transfer(TransferRequest{source=1 Any(OCIRegistry{reference=1, resolver=2{host_dir=3}}), destination=2
    Any(ImageStore{name=1, platforms=3, extra_references=6{name=1}, unpacks=10{platform=1, snapshotter=2}})}),
    hand-encoded (ctr's pull stores one name)."""
    def any_of(type_url, value):
        return _field(1, type_url.encode()) + _field(2, value)

    platform = _field(1, b"linux") + _field(2, go_arch().encode())
    source = _field(1, reference.encode()) + _field(2, _field(3, runtime.hosts_dir().encode()))
    store = (_field(1, reference.encode()) + _field(3, platform) + b"".join(_field(6, _field(1, name.encode())) for name in extra)
             + _field(10, _field(1, platform) + _field(2, snapshotter.encode())))
    request = _field(1, any_of("containerd.types.transfer.OCIRegistry", source)) + _field(2, any_of("containerd.types.transfer.ImageStore", store))
    _grpc(runtime, "/containerd.services.transfer.v1.Transfer/Transfer", request, namespace, timeout=120)


def create_gc_fixtures(runtime, line, size=MIB):
    """Objects of every kind containerd's collector follows, outside k8s.io; returns their names.

    gc-tools (never listed): a ctr-made gc.root snapshot on overlayfs and one on native; a chain kept only by an image
    record's own gc.ref.snapshot label; a chain kept by a gc.root blob's label; a ctr container (its snapshot, and a blob
    its gc.ref.content label names); a flat lease holding a blob (whose gc.ref.content label it does not follow) and a
    chain's top (whose parent it keeps); a plain lease holding a blob that names another. gc-drop (listed): an image
    whose record labels name a chain and a blob. Every gc.root that ctr sets on the chains is removed once what keeps
    them is in place; the last step runs containerd's collection, so what none of it keeps is gone when this returns.
    Then the labels of later collectors (``_newer_labels``, on every ``line``: the collector's release line) and, on
    containerd 2.x, an image pulled under two names in each namespace (``_two_name_pulls``)."""
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
    _newer_labels(runtime, names, size // 4, line)
    if line >= "2.0":
        _two_name_pulls(runtime, names, size // 4)
    for ns in (t, d):
        ctr_ok(runtime, ns, "leases", "rm", "--sync", "fixture-hold")  # --sync: containerd's collection has run
    return names


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _held_chain(runtime, namespace, prefix, size, lease_id, *top_labels):
    """A chain <prefix>-base <- <prefix>-top kept only by lease ``lease_id`` (which holds its top), ``top_labels`` on the top."""
    base, top = chain(runtime, namespace, prefix, size)
    lease_add(runtime, namespace, lease_id, top, "snapshots/overlayfs")
    if top_labels:
        label_snapshot(runtime, namespace, top, *top_labels)
    for key in (base, top):
        label_snapshot(runtime, namespace, key, GC_ROOT + "=")
    return [base, top]


def _newer_labels(runtime, names, size, line):
    """The labels containerd's later collectors follow, on objects of gc-tools, made on every line: where a line does not
    follow them they are plain labels. Each is kept by plain-lease until the test removes that lease, unless it is a root
    anyway, so that the test's own collection decides it:

    - back references (2.2+): a blob to the kept image, a chain's top to the ctr container, a blob to the container's
      blob, a snapshot to the image chain's top, and an image record (another name of gc-kept:1, expired, as containerd
      2.3's transfer service writes an extra name) to gc-kept:1;
    - the gc.root prefix (2.2+): a blob held by plain-lease with a gc.root.* key only; a snapshot with a gc.root.* key only
      (a root on 2.2+, nothing older); a blob with both gc.root and a gc.root.* key (a root on every line);
    - conditional references (2.3): gc-kept:1's labels keep a chain used now while used less than an hour ago, not a
      chain used three hours ago, and keep that one's twin while used more than two hours ago;
    - an ingest opened in plain-lease (it goes with the lease) and one outside any lease (containerd keeps it for 24
      hours; its expiry is not in the API)."""
    t = "gc-tools"
    kept = "docker.io/library/gc-kept:1"
    names["bref_image"] = held_blob(runtime, t, "plain-lease", "bref-image", size, "containerd.io/gc.bref.image=" + kept)
    names["bref_container_chain"] = _held_chain(runtime, t, "bref-ctr", size, "plain-lease", "containerd.io/gc.bref.container=tool-ctr")
    names["bref_blob"] = held_blob(runtime, t, "plain-lease", "bref-blob", size, "containerd.io/gc.bref.content.x=" + names["container_blob"])
    names["bref_snapshot"] = write_snapshot(runtime, t, "bref-snap", size)
    lease_add(runtime, t, "plain-lease", names["bref_snapshot"], "snapshots/overlayfs")
    label_snapshot(runtime, t, names["bref_snapshot"], "containerd.io/gc.bref.snapshot.overlayfs/y=" + names["image_chain"][1], GC_ROOT + "=")
    names["alias"] = "docker.io/library/gc-kept-alias:1"
    ctr_ok(runtime, t, "images", "tag", kept, names["alias"])
    if line >= "2.0":  # 1.x leases hold no images (and 1.x never collects an image record)
        lease_add(runtime, t, "plain-lease", names["alias"], "images")
    ctr_ok(runtime, t, "images", "label", names["alias"], "containerd.io/gc.bref.image=" + kept, "containerd.io/gc.expire=2020-01-01T00:00:00Z")
    names["prefix_held"] = held_blob(runtime, t, "plain-lease", "prefix-held", size, "containerd.io/gc.root.kubenode=held")
    names["prefix_both"] = held_blob(runtime, t, "fixture-hold", "prefix-both", size, GC_ROOT + "=tool", "containerd.io/gc.root.kubenode=both")
    names["prefix_snapshot"] = write_snapshot(runtime, t, "prefix-rw", size)
    label_snapshot(runtime, t, names["prefix_snapshot"], "containerd.io/gc.root.kubenode=snap", GC_ROOT + "=")
    now = time.time()
    names["cond_kept_chain"] = _held_chain(runtime, t, "cond-kept", size, "plain-lease", "containerd.io/gc.cond.value-usedat=" + rfc3339(now))
    names["cond_old_chain"] = _held_chain(runtime, t, "cond-old", size, "plain-lease", "containerd.io/gc.cond.value-usedat=" + rfc3339(now - 3 * 3600))
    names["cond_stale_chain"] = _held_chain(runtime, t, "cond-stale", size, "plain-lease", "containerd.io/gc.cond.value-usedat=" + rfc3339(now - 3 * 3600))
    ctr_ok(runtime, t, "images", "label", kept, "containerd.io/gc.cond.snapshot.overlayfs=usedat<1h|" + names["cond_kept_chain"][1],
           "containerd.io/gc.cond.snapshot.overlayfs/old=usedat<1h|" + names["cond_old_chain"][1],
           "containerd.io/gc.cond.snapshot.overlayfs/stale=usedat>2h|" + names["cond_stale_chain"][1])
    names["leased_ingest"] = "pull-cut-off"
    leased_ingest(runtime, t, "plain-lease", names["leased_ingest"], size)
    names["unleased_ingest"] = "ingest-cut-off"
    stale_ingest(runtime, t, names["unleased_ingest"], size)


def _two_name_pulls(runtime, names, size):
    """An image pulled under two names through containerd's transfer service from the harness's registry, in gc-tools
    (kept) and in gc-drop (its names go with the namespace's images); containerd 2.3 labels the extra name
    gc.bref.image and a past gc.expire."""
    for ns, key, ref in (("gc-tools", "pulled", "docker.io/library/gc-pulled:1"), ("gc-drop", "drop_pulled", "docker.io/library/gc-drop-pulled:1")):
        fd, path = tempfile.mkstemp(prefix="push-", suffix=".tar", dir=runtime.workdir)
        os.close(fd)
        try:
            digests = build_archive(path, [ImageSpec(ref, size=size, share_base=False)])
            runtime.registry.push(path, ref, digests[ref])
        finally:
            os.unlink(path)
        alias = ref.replace(":1", "-alias:1")
        transfer_pull(runtime, ns, ref, extra=[alias])
        names[key] = [ref, alias]


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
