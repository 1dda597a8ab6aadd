# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every kind of object a Docker Engine node holds, created for real on the harness's dockerd (behind cri-dockerd), each
measured with statvfs while it is made; and ``docker system df -v`` of Debian's docker CLI, parsed, as the reference.

* a pod (through the CRI) whose container writes into its writable layer and prints to its log (Docker's json-file);
* a container outside Kubernetes (``docker run``) writing into its writable layer, running;
* a named volume and an anonymous volume a stopped container still references, and an anonymous volume no container
  references any more (its container removed without ``-v``);
* a BuildKit build cache record no image shares: ``DOCKER_BUILDKIT=1 docker build`` of a tiny offline context FROM an
  image present locally, whose image is then removed (its layers stay in the build cache).
"""

import glob
import os
import re
import tempfile

from devtools.images import ImageSpec

MIB = 1 << 20
IMAGE = "registry.k8s.io/docker-objects:1"
SIZES = {"k8s_image": 3 * MIB, "writable": 2 * MIB, "log": MIB, "non_k8s": 3 * MIB, "named_volume": MIB, "anonymous_volume": 2 * MIB,
         "dangling_volume": 3 * MIB // 2, "build_cache": 2 * MIB}


def used_bytes(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def log_bytes(runtime):
    """{container id: bytes its json-file logs take in the data root}, as the filesystem says."""
    out = {}
    for path in glob.glob(os.path.join(runtime.root, "containers", "*", "*-json.log*")):
        cid = os.path.basename(os.path.dirname(path))
        out[cid] = out.get(cid, 0) + os.lstat(path).st_blocks * 512
    return out


def create_all(runtime, build_dir=None):
    """Make every kind of object; returns (made: names and ids, created: {kind: bytes statvfs saw it take})."""
    created, made = {}, {}
    mount = runtime.imagefs_mountpoint

    def step(name, fn, *args, **kwargs):
        before = used_bytes(mount)
        value = fn(*args, **kwargs)
        created[name] = created.get(name, 0) + used_bytes(mount) - before
        return value

    ids = step("k8s_image", runtime.pull_images, [ImageSpec(IMAGE, size=SIZES["k8s_image"])])
    made["image_id"] = ids[IMAGE]
    # a pod: its container writes into its writable layer and prints base64 to its log, then exits
    pod = runtime.run_pod("writer", namespace="docker-ns")
    script = ("busybox head -c %d /dev/urandom > /layer.bin; busybox head -c %d /dev/urandom | busybox base64"
              % (SIZES["writable"], SIZES["log"] * 3 // 4))
    made["container"] = step("writable", runtime.add_container, pod, "writer", IMAGE, state="exited", command=["/bin/sh", "-c", script])
    made["pod"] = pod[0]
    # the log and the layer were written by the same process: split them by the log file's own size
    created["log"] = log_bytes(runtime).get(made["container"], 0)
    created["writable"] -= created["log"]
    # a container outside Kubernetes, running, with data in its writable layer

    def outside():
        runtime.docker("run", "-d", "--name", "outside-web", "--network", "none", IMAGE,
                       "-c", "busybox head -c %d /dev/urandom > /cache.bin; exec sleep 2147483647" % SIZES["non_k8s"])
        cid = runtime.docker("inspect", "-f", "{{.Id}}", "outside-web").strip()
        _wait_size(runtime, cid, SIZES["non_k8s"])  # it writes after docker run -d returned
        return cid

    made["non_k8s"] = step("non_k8s", outside)
    # volumes: a named one, an anonymous one a stopped container references, an anonymous one nothing references
    step("named_volume", runtime.docker, "run", "--name", "outside-named", "--network", "none", "-v", "kept-data:/vol", IMAGE,
         "-c", "busybox head -c %d /dev/urandom > /vol/x" % SIZES["named_volume"])
    step("anonymous_volume", runtime.docker, "run", "--name", "outside-anon", "--network", "none", "-v", "/vol", IMAGE,
         "-c", "busybox head -c %d /dev/urandom > /vol/x" % SIZES["anonymous_volume"])
    made["anonymous_volume"] = _volume_of(runtime, "outside-anon")

    def dangling():
        runtime.docker("run", "--name", "outside-gone", "--network", "none", "-v", "/vol", IMAGE,
                       "-c", "busybox head -c %d /dev/urandom > /vol/x" % SIZES["dangling_volume"])
        name = _volume_of(runtime, "outside-gone")
        runtime.docker("rm", "outside-gone")  # without -v: its anonymous volume stays, referenced by nothing
        return name

    made["dangling_volume"] = step("dangling_volume", dangling)
    # BuildKit's cache: a build FROM the local image, whose image is removed again (its layers stay in the cache only)
    made["build_cache"] = step("build_cache", build, runtime, build_dir)
    return made, created


def build(runtime, build_dir=None):
    """DOCKER_BUILDKIT=1 docker build of a tiny offline context (FROM the local IMAGE, one RUN writing SIZES["build_cache"]),
    then the built image removed: returns the ids of the cache records that hold the RUN's layer and no image shares."""
    context = tempfile.mkdtemp(prefix="build-", dir=build_dir or runtime.workdir)
    with open(os.path.join(context, "Dockerfile"), "w", encoding="utf-8") as f:
        f.write("FROM %s\nRUN busybox head -c %d /dev/urandom > /built.bin\n" % (IMAGE, SIZES["build_cache"]))
    runtime.docker("build", "--network", "host", "-t", "kubenode-built:1", context, env={"DOCKER_BUILDKIT": "1"})
    runtime.docker("rmi", "kubenode-built:1")
    records = runtime.api.system_df().get("BuildCache") or []
    return [r["ID"] for r in records if not r.get("Shared") and r.get("Size", 0) >= SIZES["build_cache"]]


def _volume_of(runtime, container):
    return runtime.docker("inspect", "-f", "{{range .Mounts}}{{.Name}}{{end}}", container).strip()


def _wait_size(runtime, cid, size, timeout=20):
    """Until the container's writable layer holds ``size`` bytes (it writes after ``docker run -d`` returned)."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in runtime.api.system_df().get("Containers") or []:
            if c["Id"] == cid and (c.get("SizeRw") or 0) >= size:
                return
        time.sleep(0.2)
    raise AssertionError("container %s did not write %d bytes" % (cid, size))


_UNITS = {"B": 1, "KB": 1000, "kB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}


def parse_size(text):
    """A size as the docker CLI prints it (79B, 2.1MB, 1.98kB: decimal units, three significant digits) in bytes."""
    m = re.match(r"^([0-9.]+)\s*([kKMGT]?B)$", text.strip())
    if not m:
        raise ValueError("not a docker size: %r" % text)
    return float(m.group(1)) * _UNITS[m.group(2)]


def system_df(runtime):
    """``docker system df -v`` (and ``docker system df`` for the images' total, which -v does not print), parsed:
    {"images": bytes, "containers": {name: bytes}, "volumes": {name: bytes}, "build_cache": bytes}."""
    summary = runtime.docker("system", "df", "--format", "{{.Type}}\t{{.Size}}")
    totals = dict(line.split("\t") for line in summary.splitlines() if "\t" in line)
    out = {"images": parse_size(totals["Images"]), "containers": {}, "volumes": {}, "build_cache": None}
    section = None
    for line in runtime.docker("system", "df", "-v").splitlines():
        if line.startswith("Images space usage"):
            section = "images"
        elif line.startswith("Containers space usage"):
            section = "containers"
        elif line.startswith("Local Volumes space usage"):
            section = "volumes"
        elif line.startswith("Build cache usage:"):
            out["build_cache"] = parse_size(line.split(":", 1)[1])
            section = None
        elif not line.strip() or line.startswith(("CONTAINER ID", "VOLUME NAME", "REPOSITORY")):
            continue
        elif section == "containers":
            cols = re.split(r"\s{2,}", line.strip())
            # CONTAINER ID, IMAGE, COMMAND, LOCAL VOLUMES, SIZE, CREATED, STATUS, NAMES
            out["containers"][cols[-1]] = parse_size(cols[4])
        elif section == "volumes":
            cols = line.split()
            out["volumes"][cols[0]] = parse_size(cols[-1])
    return out
