# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): what the compressed layer blobs of pulled images cost the image filesystem (issue 42).

    python -m benchmarks.layer_blobs [--runtime containerd-1.6 --runtime containerd-2.3 ...] [--images 6] [--size 16M]
                                     [--content host|random]

For each runtime (containerd 1.6 and 2.3 by default), on a fresh runtime:
1. pulls ``--images`` images through the CRI from the harness's registry (as the kubelet does), each a busybox layer and
   a layer of ``--size`` bytes of this machine's own files (libraries, Python sources: they compress as real images'
   layers do; ``--content random``: random bytes, which gzip cannot compress, the upper bound of the second copy),
   every layer its own (the sandbox image's blobs are discarded first, so the figures are the pulled images' alone);
2. measures the image filesystem (statvfs) per pulled image, and what disk_usage attributes: ``unpacked_layer_blobs``
   (the compressed blobs) against ``k8s_images`` (manifests, configs, unpacked snapshots);
3. runs storage_gc with ``discard_unpacked_layers`` (in-module) and measures again;
4. on a second fresh runtime whose configuration sets containerd's own ``discard_unpacked_layers`` (written by
   runtime_config's planner where that containerd's config version reads it), pulls the same images and measures after
   containerd's next collection.
Prints the bytes per image before and after, the ratio and the blobs' compression ratio. Nothing is asserted. Run as
root (tmpfs, the runtime).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from devtools.collection import make_importable  # noqa: E402  pylint: disable=wrong-import-position

make_importable()

from devtools import runtimes  # noqa: E402  pylint: disable=wrong-import-position
from devtools.images import ImageSpec  # noqa: E402  pylint: disable=wrong-import-position
from devtools.runtime import parse_size  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config_policy as rc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import CRI_NAMESPACE, ContainerdClient  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage, _storage_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.modules import disk_usage, storage_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order

MIB = 1 << 20


def used(rt):
    st = os.statvfs(rt.imagefs_mountpoint)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def specs(n, size, content="host"):
    if content == "random":
        return [ImageSpec("registry.example/bench/random-%02d:1" % i, size=size, share_base=False) for i in range(n)]
    return [ImageSpec("registry.example/bench/layers-%02d:1" % i, host_size=size, share_base=False) for i in range(n)]


def categories(rt):
    client = type(rt.client)(rt.endpoint)
    try:
        opts = _disk_usage.options(params_for(disk_usage.ARGUMENT_SPEC, pod_logs_dir=rt.pod_logs, kubelet_root_dir=rt.workdir))
        return _disk_usage.run(client, opts)["categories"]
    finally:
        client.close()


def discard(rt):
    client = type(rt.client)(rt.endpoint)
    try:
        started = time.perf_counter()
        result = _storage_gc.run(client, _storage_gc.options(params_for(storage_gc.ARGUMENT_SPEC, discard_unpacked_layers=True)))
        return result, time.perf_counter() - started
    finally:
        client.close()


def collect(rt):
    """Run containerd's garbage collection now (what its next collection would do)."""
    client = type(rt.client)(rt.endpoint)
    try:
        ContainerdClient(client).collect_garbage(CRI_NAMESPACE, "kubenode-gc-bench-")
    finally:
        client.close()


def with_discard_config(rt):
    """Set discard_unpacked_layers in the runtime's own config file (runtime_config's planner) and restart it."""
    with open(rt.config_path, encoding="utf-8") as f:
        text = f.read()
    planned = rc.plan_containerd(text, rt.config_path, {"discard_unpacked_layers": True})
    with open(rt.config_path, "w", encoding="utf-8") as f:
        f.write(planned["after"])
    rt.restart()


def measure(name, n, size, imagefs_size, content):
    out = {}
    rt = runtimes.make(name, imagefs_size=imagefs_size)
    rt.start()
    try:
        os.environ["KUBENODE_GC_LOCK_DIR"] = rt.workdir
        out["version"] = rt.version
        discard(rt)  # the sandbox image's own blobs first: the figures below are the pulled images' alone
        base, before = used(rt), categories(rt)
        rt.pull_images(specs(n, size, content))
        out["pulled"] = used(rt) - base
        cats = categories(rt)
        out["blobs"] = cats["unpacked_layer_blobs"]["bytes"] - before["unpacked_layer_blobs"]["bytes"]
        out["k8s_images"] = cats["k8s_images"]["bytes"] - before["k8s_images"]["bytes"]
        result, out["discard_seconds"] = discard(rt)
        out["discarded"] = used(rt) - base
        out["freed"], out["layer_blobs"] = result["freed_bytes"], sum(1 for s in result["removed"] if s["kind"] == "layer_blob")
    finally:
        rt.stop()
    rt = runtimes.make(name, imagefs_size=imagefs_size)
    rt.start()
    try:
        with_discard_config(rt)
        discard(rt)
        base = used(rt)
        rt.pull_images(specs(n, size, content))
        collect(rt)
        out["pulled_with_setting"] = used(rt) - base
    finally:
        rt.stop()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.layer_blobs", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runtime", action="append", choices=[n for n in runtimes.NAMES if n.startswith("containerd-")])
    parser.add_argument("--images", type=int, default=6)
    parser.add_argument("--size", default="16M", help="bytes of the machine's own files in each image's own layer (16M)")
    parser.add_argument("--content", choices=["host", "random"], default="host", help="the layer's bytes: /usr/lib files or random")
    args = parser.parse_args(argv)
    names = [n for n in (args.runtime or ["containerd-1.6", "containerd-2.3"]) if runtimes.available(n)]
    size = parse_size(args.size)
    imagefs = args.images * size * 3 + 128 * MIB
    print("load average (1, 5, 15 min)      : %.2f %.2f %.2f on %d cores" % (os.getloadavg() + (os.cpu_count() or 1,)))
    print("images per runtime               : %d, each busybox + %.1f MiB of %s, every layer its own, gzip as pushed"
          % (args.images, size / MIB, "/usr/lib files" if args.content == "host" else "random bytes"))
    for name in names:
        m = measure(name, args.images, size, imagefs, args.content)
        per = {k: m[k] / args.images / MIB for k in ("pulled", "discarded", "pulled_with_setting", "blobs", "k8s_images")}
        print("%s (%s)" % (name, m["version"]))
        print("  imagefs per pulled image       : %7.2f MiB  (disk_usage: %.2f MiB unpacked_layer_blobs + %.2f MiB k8s_images)"
              % (per["pulled"], per["blobs"], per["k8s_images"]))
        print("  after storage_gc discard       : %7.2f MiB  (%.0f %% of before; %d layer blobs, freed %.2f MiB measured, %.2f s)"
              % (per["discarded"], 100.0 * m["discarded"] / m["pulled"], m["layer_blobs"], m["freed"] / MIB, m["discard_seconds"]))
        print("  pulled with discard_unpacked_layers set: %7.2f MiB (%.0f %% of before)"
              % (per["pulled_with_setting"], 100.0 * m["pulled_with_setting"] / m["pulled"]))
        print("  compressed / unpacked          : %.2f" % (m["blobs"] / max(1, m["k8s_images"])))
    if not names:
        print("no containerd runtime available")
    return 0


if __name__ == "__main__":
    sys.exit(main())
