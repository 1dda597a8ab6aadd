# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): image_gc's removals against crictl and the raw RPC floor, on a real runtime.

    python -m benchmarks.image_gc_prune [--images 500] [--repeat 3] [--parallelism N] [--short] [--cri]
                                        [--runtime containerd-1.6|containerd-1.7|containerd-2|crio]

One run, one runtime (containerd 1.6 by default), a fresh set of N small images for each line:
1. raw sequential RemoveImage, one call at a time (the kubelet's way), timing only the calls;
2. ``crictl rmi --prune`` (../shared/runtimes/crictl beside the repository, else crictl on PATH) and
   image_gc prune, in-module (node read, ledger, plan, pipelined removals with container re-lists),
   one after the other ``--repeat`` times: the medians, and the median of the rounds' ratios, measured in the
   same run (other work on the machine slows both alike);
3. image_gc prune, the whole ``ansible localhost -m kubenode.gc.image_gc`` command;
4. a threshold pass that must remove N/2 images whose layers are all their own (high 1 %, low 0 %,
   max_removals N/2, measured stop after each batch), against crictl pruning N/2 images of the same kind.
Prints the times, the ratios against the issues' targets, the removal path image_gc took (containerd's images
API or the CRI; ``--cri`` forces the CRI) and the machine's load. ``--short`` (scripts/test.sh's bench step) is
2 alone, 200 images, 3 rounds. Nothing is asserted: a regression shows as a ratio. Run as root (tmpfs, the runtime).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from devtools.collection import REPO, collections_path, make_importable  # noqa: E402  pylint: disable=wrong-import-position

make_importable()

from devtools import runtimes  # noqa: E402  pylint: disable=wrong-import-position
from devtools.images import ImageSpec  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.modules import image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order


def find_crictl():
    beside = os.path.join(os.path.dirname(REPO), "shared", "runtimes", "crictl")
    return beside if os.access(beside, os.X_OK) else shutil.which("crictl")


def timed(func):
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def import_set(rt, prefix, n, size=0, share_base=True):
    rt.import_images([ImageSpec("%s-%04d:1" % (prefix, i), size=size, share_base=share_base) for i in range(n)])
    return [img.id for img in rt.client.list_images() if any(t.startswith("docker.io/library/%s-" % prefix) for t in img.repo_tags)]


def removal_path(calls):
    """How image_gc removed, from its RPC counts: containerd's images API (one collection) or the CRI's RemoveImage."""
    return "containerd images API + one collection" if calls.get("containerd.images.Delete") else "CRI RemoveImage"


def prune_rounds(rt, crictl, n, repeat, tmp, extra):
    """``repeat`` rounds of crictl rmi --prune then image_gc prune in-module, each on a fresh set of ``n`` images:
    {"crictl": [s], "module": [s], "ratios": [module / crictl], "removed": int, "calls": {rpc: n}} (calls of the last round)."""
    out = {"crictl": [], "module": [], "ratios": []}
    for round_ in range(repeat):
        if crictl:
            import_set(rt, "bench-crictl%d" % round_, n)
            out["crictl"].append(timed(lambda: subprocess.run([crictl, "--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "rmi", "--prune"],
                                                              check=True, capture_output=True))[0])
        import_set(rt, "bench-gc%d" % round_, n)
        client = type(rt.client)(rt.endpoint)
        opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s",
                                            ledger_path=os.path.join(tmp, "l-%d.json" % round_), **extra))
        seconds, result = timed(lambda: _image_gc.run(client, opts))  # pylint: disable=cell-var-from-loop
        client.close()
        out["module"].append(seconds)
        if crictl:
            out["ratios"].append(seconds / out["crictl"][-1])
        out["removed"], out["calls"] = len(result["removed"]), dict(sorted(client.rpc_calls.items()))
    return out


def print_rounds(rounds, n, crictl):
    print("load average (1, 5, 15 min)      : %.2f %.2f %.2f on %d cores" % (os.getloadavg() + (os.cpu_count() or 1,)))
    print("image_gc removal path            : %s" % removal_path(rounds["calls"]))
    if crictl:
        print("crictl rmi --prune (%4d)        : %7.2f s  median of %s" % (n, statistics.median(rounds["crictl"]), _list(rounds["crictl"])))
    print("image_gc prune, in-module       : %7.2f s  median of %s (%d removed; rpc_calls %s)" % (
        statistics.median(rounds["module"]), _list(rounds["module"]), rounds["removed"], rounds["calls"]))
    if crictl:
        print("image_gc prune / crictl, same run: %5.2f  median of the rounds' ratios %s (target <= 1; <= 0.5 on containerd's images API)" % (
            statistics.median(rounds["ratios"]), _list(rounds["ratios"])))


def _list(values):
    return "[" + ", ".join("%.2f" % v for v in values) + "]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=None, help="images per set (default 500, 200 with --short)")
    parser.add_argument("--repeat", type=int, default=None, help="rounds of crictl and image_gc prune (default 3)")
    parser.add_argument("--parallelism", type=int, default=None, help="image_gc's parallelism (default: the module's)")
    parser.add_argument("--runtime", default=runtimes.DEFAULT, choices=runtimes.NAMES)
    parser.add_argument("--short", action="store_true", help="only the prune rounds against crictl (the test command's mode)")
    parser.add_argument("--cri", action="store_true", help="image_gc removes through the CRI even where containerd's images API is proven")
    args = parser.parse_args()
    if args.cri:
        _image_gc.NATIVE_MIN_IMAGES = float("inf")
    n = args.images or (200 if args.short else 500)
    half = n // 2
    repeat = args.repeat or 3
    crictl = find_crictl()
    extra = {} if args.parallelism is None else {"parallelism": args.parallelism}
    parallelism = extra.get("parallelism", image_gc.ARGUMENT_SPEC["parallelism"]["default"])
    out = {}

    print("runtime %s, %d images per set, image_gc parallelism %d, crictl %s" % (args.runtime, n, parallelism, crictl or "not found"))
    with runtimes.make(args.runtime, imagefs_size="2G") as rt, tempfile.TemporaryDirectory() as tmp:
        if args.short:
            print_rounds(prune_rounds(rt, crictl, n, repeat, tmp, extra), n, crictl)
            return 0
        ids = import_set(rt, "bench-raw", n)
        out["raw"] = timed(lambda: [rt.client.remove_image(i) for i in ids])[0]

        rounds = prune_rounds(rt, crictl, n, repeat, tmp, extra)
        out["module"] = statistics.median(rounds["module"])
        if crictl:
            out["crictl"] = statistics.median(rounds["crictl"])
            # the same kind of images as the threshold pass below (every layer their own), so both delete the same bytes
            import_set(rt, "bench-crictl-half", half, size=64 << 10, share_base=False)
            out["crictl_half"] = timed(lambda: subprocess.run([crictl, "--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "rmi", "--prune"],
                                                              check=True, capture_output=True))[0]

        import_set(rt, "bench-ansible", n)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_PYTHON_INTERPRETER=sys.executable)
        module_args = json.dumps(dict(cri_endpoint=rt.endpoint, mode="prune", min_age="0s", ledger_path=os.path.join(tmp, "l2.json"), **extra))
        cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local", "-m", "kubenode.gc.image_gc", "-a", module_args]
        out["ansible"], proc = timed(lambda: subprocess.run(cmd, env=env, capture_output=True, text=True, check=False))
        if proc.returncode:
            print(proc.stdout[-2000:], proc.stderr[-2000:])

        # every layer of its own per image (no shared base), so that each removal frees what its size says: the
        # measured stop (issue 12 B) then lets the pass go on to max_removals, as it must to remove about N/2
        import_set(rt, "bench-threshold", n, size=64 << 10, share_base=False)
        opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, min_age="0s", high_threshold_percent=1, low_threshold_percent=0,
                                            max_removals=half, ledger_path=os.path.join(tmp, "l3.json"), **extra))
        out["threshold"], tresult = timed(lambda: _image_gc.run(type(rt.client)(rt.endpoint), opts))

    def ratio(a, b):
        return out[a] / out[b] if out.get(b) else float("nan")

    print("raw sequential RemoveImage      : %7.2f s" % out["raw"])
    print_rounds(rounds, n, crictl)
    if crictl:
        print("crictl rmi --prune (%4d)        : %7.2f s" % (half, out["crictl_half"]))
    print("image_gc prune, whole ansible   : %7.2f s" % out["ansible"])
    print("image_gc threshold, %4d removals: %7.2f s  (%d removed)" % (half, out["threshold"], len(tresult["removed"])))
    print("targets (issue 12 C):")
    print("  whole ansible - crictl          : %5.2f s (target <= 1.5 s)" % (out["ansible"] - out.get("crictl", float("nan"))))
    print("  rate vs the kubelet's serial    : %5.1fx (target >= 20x)" % ratio("raw", "module"))
    print("  threshold %d / crictl %d      : %5.2f  (target <= 2)" % (half, half, ratio("threshold", "crictl_half")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
