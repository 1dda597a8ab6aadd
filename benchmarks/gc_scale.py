# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): image_gc and container_gc on a large node, against crictl and the raw RPC floor.

    python -m benchmarks.gc_scale [--images 2000] [--containers 10000] [--exited 7000] [--short] [--runtime containerd-1.6|...]

One run, one runtime (containerd 1.6 by default). The node holds ``--images`` unused images and
``--containers`` dead containers in 100 pods (``--exited`` of them exited, the others created and never started), as
on a node whose pods churned.
It prints, each measured in this run:

1. planning: ``image_gc`` and ``container_gc`` check mode in-module on the empty node and on the full one,
   against the raw list-RPC floor (ListImages + ListContainers + ListPodSandbox, the median of 5 on the
   full node); target: (full - empty) <= 10x the floor;
2. peak RSS of a fresh Python process running each check-mode plan on the full node; target <= 150 MB;
3. ``image_gc`` prune of the images in-module against ``crictl rmi --prune`` of a set of the same size;
   target: <= crictl + 1 s, and the ratio of the two, measured in this run (image_gc's removal path named);
4. ``container_gc`` removing every dead container (their pods are gone: ``active_pod_uids: []``) against
   serial ``RemoveContainer`` over a separate set of ``--serial`` containers; target: >= 10x the serial rate.
   For both it prints how busy the machine's cores were and the CPU time spent outside this process (the runtime,
   its shims, runc) per removal: when the runtime needs T ms of CPU per removal, N cores cannot remove more than
   N / T a second, whatever the client does.
5. ``disk_usage`` in-module on the full node (its own ``elapsed_seconds``, median of 3); target: <= 2 s
   (``--disk-usage-only`` builds the fixture, measures it and stops);
``--short`` (scripts/test.sh's bench step): 300 images, 100 dead containers (50 exited), 20 serial; every line.
Nothing is asserted: a regression shows as a ratio. Run as root (tmpfs, the runtime). Building the full fixture takes a
few minutes.
"""

import argparse
import concurrent.futures
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from devtools.collection import REPO, make_importable  # noqa: E402  pylint: disable=wrong-import-position

make_importable()

from benchmarks.image_gc_prune import find_crictl, import_set, removal_path, timed  # noqa: E402  pylint: disable=wrong-import-position
from devtools import runtimes  # noqa: E402  pylint: disable=wrong-import-position
from devtools.images import ImageSpec  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc, _image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.modules import container_gc, disk_usage, image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order

PODS = 100
EXITED_CHUNK = 500
EXITED = 2  # runtime.v1.ContainerState.CONTAINER_EXITED

# A fresh interpreter that plans on the full node and prints nothing: its peak RSS is what a module run costs.
RSS_PROBE = r"""
import json, sys
sys.path.insert(0, %(repo)r)
from devtools.collection import make_importable
make_importable()
from devtools.cri import DevCriClient
from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc, _image_gc
from ansible_collections.kubenode.gc.plugins.modules import container_gc, image_gc
which, endpoint, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mod, spec = (_image_gc, image_gc.ARGUMENT_SPEC) if which == "image_gc" else (_container_gc, container_gc.ARGUMENT_SPEC)
mod.run(DevCriClient(endpoint), mod.options(params_for(spec, **params)), check_mode=True)
# VmHWM: this process's own peak (wait4's ru_maxrss would also count the parent's pages at fork)
print([line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")][0])
"""


def machine_busy():
    """Seconds of CPU the whole machine has spent (all cores, not idle nor iowait), and this process's own."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # minus idle and iowait
    own = resource.getrusage(resource.RUSAGE_SELF)
    return busy / os.sysconf("SC_CLK_TCK"), own.ru_utime + own.ru_stime


def metered(func):
    """(wall seconds, value, cpu) where cpu holds the machine's busy share of all its cores during the call and the
    CPU seconds spent outside this process (the runtime side)."""
    busy0, own0 = machine_busy()
    wall, value = timed(func)
    busy1, own1 = machine_busy()
    cores = os.cpu_count() or 1
    return wall, value, {"busy": (busy1 - busy0) / (wall * cores), "outside": (busy1 - busy0) - (own1 - own0), "cores": cores}


def floor(client, runs=5):
    """The raw list-RPC floor: the three list calls a plan needs, nothing else (median of ``runs``)."""
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        client.list_images()
        client.list_containers()
        client.list_pod_sandbox()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def plan_time(rt, which, params, runs=3):
    mod, spec = (_image_gc, image_gc.ARGUMENT_SPEC) if which == "image_gc" else (_container_gc, container_gc.ARGUMENT_SPEC)
    opts = mod.options(params_for(spec, **params))
    times = []
    for _run in range(runs):
        client = type(rt.client)(rt.endpoint)
        times.append(timed(lambda: mod.run(client, opts, check_mode=True))[0])  # pylint: disable=cell-var-from-loop
        client.close()
    return statistics.median(times)


def peak_rss_mb(rt, which, params):
    proc = subprocess.run([sys.executable, "-c", RSS_PROBE % {"repo": REPO}, which, rt.endpoint, json.dumps(params)],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError("the %s plan failed (exit %d): %s" % (which, proc.returncode, proc.stderr[-2000:]))
    return int(proc.stdout.split()[-1]) / 1024.0  # kB


def dead_containers(rt, prefix, count, image, exited=0):
    """``count`` dead containers spread over PODS pods, the first ``exited`` of them exited, the others created (never
    started); returns their ids. containerd holds two descriptors per created container (its output FIFOs) and none
    per exited one, so the exited ones are made in chunks (created, started, then waited for with one list call a
    poll) and the mix keeps the runtime under this machine's limit of open files."""
    pods = [rt.run_pod("%s-%d" % (prefix, p), uid="uid-%s-%d" % (prefix, p)) for p in range(PODS)]

    def create(i):
        # round robin over the pods, so that a chunk started at once spreads over every pod's shim
        j = i // PODS
        return rt.add_container(pods[i % PODS], "c%d" % (j % 10), image, "created", attempt=j // 10,
                                command=["/bin/true"] if i < exited else None)

    ids = []
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for start in range(0, min(exited, count), EXITED_CHUNK):
            chunk = list(pool.map(create, range(start, min(start + EXITED_CHUNK, exited, count))))
            with concurrent.futures.ThreadPoolExecutor(8) as starters:
                list(starters.map(rt.client.start_container, chunk))
            wait_exited(rt, set(chunk))
            ids += chunk
        ids += list(pool.map(create, range(min(exited, count), count)))
    return ids


def wait_exited(rt, ids, timeout=300):
    deadline = time.time() + timeout
    while True:
        running = [c.id for c in rt.client.list_containers() if c.id in ids and c.state != EXITED]
        if not running:
            return
        if time.time() > deadline:
            raise RuntimeError("%d containers did not exit within %d s" % (len(running), timeout))
        time.sleep(0.5)


def disk_usage_time(rt, runs=3):
    """disk_usage in-module on the node: the median of its own elapsed_seconds, and the RPCs of one run."""
    opts = _disk_usage.options(params_for(disk_usage.ARGUMENT_SPEC, pod_logs_dir=rt.pod_logs, kubelet_root_dir=rt.workdir))
    times = []
    for _run in range(runs):
        client = type(rt.client)(rt.endpoint)
        result = _disk_usage.run(client, opts)
        times.append(result["elapsed_seconds"])
        client.close()
    return statistics.median(times), client.rpc_calls


def cpu_line(cpu, removals):
    return "cores %3.0f%% busy, runtime side %.1f ms CPU per removal" % (cpu["busy"] * 100, cpu["outside"] * 1e3 / max(1, removals))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=None, help="default 2000 (300 with --short)")
    parser.add_argument("--containers", type=int, default=None, help="default 10000 (100 with --short)")
    parser.add_argument("--serial", type=int, default=None, help="containers removed one at a time for the serial rate (default 500, 20 with --short)")
    parser.add_argument("--exited", type=int, default=None, help="how many of --containers are exited, the others are created (default 7000, 50 with --short)")
    parser.add_argument("--runtime", default=runtimes.DEFAULT, choices=runtimes.NAMES)
    parser.add_argument("--disk-usage-only", action="store_true", help="build the fixture, measure disk_usage, stop")
    parser.add_argument("--short", action="store_true", help="a small node (the test command's mode): every line, small sizes")
    args = parser.parse_args()
    for name, full, short in (("images", 2000, 300), ("containers", 10000, 100), ("serial", 500, 20), ("exited", 7000, 50)):
        if getattr(args, name) is None:
            setattr(args, name, short if args.short else full)
    crictl = find_crictl()
    out = {}
    with runtimes.make(args.runtime, imagefs_size="2G") as rt, tempfile.TemporaryDirectory() as tmp:
        img_params = dict(mode="prune", min_age="0s", ledger_path=os.path.join(tmp, "plan.json"))
        ctr_params = dict(active_pod_uids=[], pod_logs_dir=rt.pod_logs, container_logs_dir=os.path.join(tmp, "links"))
        os.makedirs(ctr_params["container_logs_dir"])
        out["empty_image_plan"] = plan_time(rt, "image_gc", img_params)
        out["empty_container_plan"] = plan_time(rt, "container_gc", ctr_params)

        t0 = time.perf_counter()
        rt.import_images([ImageSpec("scale-base:1")])
        image = "scale-base:1"
        # the serial set has the same share of exited containers as the set container_gc removes
        serial_ids = dead_containers(rt, "serial", args.serial, image, exited=args.serial * args.exited // max(1, args.containers))
        ids = import_set(rt, "scale-gc", args.images)
        dead_containers(rt, "dead", args.containers, image, exited=args.exited)
        print("fixture: %d images, %d + %d dead containers in %.0f s" % (len(ids), args.containers, args.serial, time.perf_counter() - t0))

        out["disk_usage"], calls = disk_usage_time(rt)
        print("disk_usage in-module (full node)   : %8.2f s (target <= 2 s); calls %s" % (out["disk_usage"], json.dumps(calls, sort_keys=True)))
        stats = []
        for _run in range(3):
            t = time.perf_counter()
            rt.client.call("ListContainerStats")
            stats.append(time.perf_counter() - t)
        out["stats_floor"] = statistics.median(stats)
        print("  its floor, ListContainerStats alone: %8.2f s (the runtime's answer to the one call for every writable layer; "
              "disk_usage minus it: %.2f s)" % (out["stats_floor"], out["disk_usage"] - out["stats_floor"]))
        if args.disk_usage_only:
            return 0
        out["floor"] = floor(rt.client)
        out["full_image_plan"] = plan_time(rt, "image_gc", img_params)
        out["full_container_plan"] = plan_time(rt, "container_gc", ctr_params)
        out["rss_image"] = peak_rss_mb(rt, "image_gc", img_params)
        out["rss_container"] = peak_rss_mb(rt, "container_gc", ctr_params)

        out["serial"], _none, out["serial_cpu"] = metered(lambda: [rt.client.remove_container(c) for c in serial_ids])

        client = type(rt.client)(rt.endpoint)
        opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s", ledger_path=os.path.join(tmp, "prune.json")))
        out["prune"], result = timed(lambda: _image_gc.run(client, opts))
        pruned, prune_calls = len(result["removed"]), dict(client.rpc_calls)
        if crictl:
            import_set(rt, "scale-crictl", args.images)
            out["crictl"] = timed(lambda: subprocess.run([crictl, "--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "rmi", "--prune"],
                                                         check=True, capture_output=True))[0]

        client = type(rt.client)(rt.endpoint)
        opts = _container_gc.options(params_for(container_gc.ARGUMENT_SPEC, **ctr_params))
        out["container_gc"], cresult, out["container_gc_cpu"] = metered(lambda: _container_gc.run(client, opts))
        removed_c = len(cresult["removed_containers"])

    serial_rate = args.serial / out["serial"]
    gc_rate = removed_c / out["container_gc"]
    print("runtime %s, %d images, %d dead containers, crictl %s" % (args.runtime, args.images, args.containers, crictl or "not found"))
    print("raw list-RPC floor (full node)     : %8.1f ms" % (out["floor"] * 1e3))
    for which in ("image", "container"):
        extra = out["full_%s_plan" % which] - out["empty_%s_plan" % which]
        print("%-15s check plan, empty : %8.1f ms; full: %8.1f ms; above empty / floor: %5.1fx (target <= 10x); peak RSS %5.1f MB (target <= 150)" % (
            which + "_gc", out["empty_%s_plan" % which] * 1e3, out["full_%s_plan" % which] * 1e3, extra / out["floor"], out["rss_%s" % which]))
    print("image_gc prune, in-module (%5d)  : %8.2f s" % (pruned, out["prune"]))
    if crictl:
        print("crictl rmi --prune (%5d)         : %8.2f s   image_gc - crictl: %+.2f s (target <= +1 s)" % (
            args.images, out["crictl"], out["prune"] - out["crictl"]))
        print("image_gc prune / crictl, same run  : %8.2f    (removal path: %s; load average %.2f on %d cores)" % (
            out["prune"] / out["crictl"], removal_path(prune_calls), os.getloadavg()[0], os.cpu_count() or 1))
    print("serial RemoveContainer (%5d)     : %8.2f s   (%.0f/s)   %s" % (
        args.serial, out["serial"], serial_rate, cpu_line(out["serial_cpu"], args.serial)))
    print("container_gc (%5d removed)       : %8.2f s   (%.0f/s)   %s" % (
        removed_c, out["container_gc"], gc_rate, cpu_line(out["container_gc_cpu"], removed_c)))
    cores = out["container_gc_cpu"]["cores"]
    per_removal = out["container_gc_cpu"]["outside"] / max(1, removed_c)
    bound = cores / per_removal if per_removal > 0 else float("inf")
    print("container_gc / serial rate          : %8.1fx (target >= 10x); the runtime's CPU per removal bounds %d cores at %.0f/s = %.1fx the serial rate" % (
        gc_rate / serial_rate, cores, bound, bound / serial_rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
