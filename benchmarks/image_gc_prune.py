# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): image_gc's removals against crictl and the raw RPC floor, on a real runtime.

    python -m benchmarks.image_gc_prune [--images 500] [--repeat 3] [--empty-repeat 3] [--parallelism N] [--short] [--cri]
                                        [--runtime containerd-1.6|containerd-1.7|containerd-2.1|crio]

One run, one runtime (containerd 1.6 by default), a fresh set of N small images for each line:
1. raw sequential RemoveImage, one call at a time (the kubelet's way), timing only the calls;
2. ``crictl rmi --prune`` (../shared/runtimes/crictl beside the repository, else crictl on PATH) and
   image_gc prune, in-module (node read, ledger, plan, pipelined removals with container re-lists),
   one after the other ``--repeat`` times: the medians, and the median of the rounds' ratios, measured in the
   same run (other work on the machine slows both alike). Where image_gc takes containerd's images API, each round
   also times that path's floor on a third set: the same Delete calls for every record of every image, all in
   flight, then the one synchronous collection, with no reading, planning, ledger or re-list; its ratio to crictl
   is the least image_gc can reach on that runtime through that API;
   In the same rounds, the whole commands (``ansible localhost -m ...``, controller and module process): an empty
   ``kubenode.gc.cri_info`` run (the node holds only the sandbox image), image_gc with nothing to remove (prune, and
   the default threshold pass), and image_gc prune of a fresh set of N. Each whole image_gc command minus the
   round's empty cri_info run is its cost by the prune issue's definition: the empty runs give image_gc's fixed
   cost above cri_info (issue 43: <= 30 ms), the prune its in-module time against crictl's (issue 43: <= crictl).
   Each empty run is made three times per round (``--empty-repeat``; the round's figure is their median), and the
   empty prune's fixed cost is also given as the median of every empty run paired with the cri_info run just before
   it. The module processes alone (``python -m`` the module with its arguments, no controller, bytecode cached) are
   timed the same way, and the empty runs once more as Ansible starts them on the node (the AnsiballZ file, the
   collection compiled from the zip);
   last, the controller's part: ansible-core building each module's payload (recursive_finder), in fresh processes;
3. image_gc prune, the whole ``ansible localhost -m kubenode.gc.image_gc`` command (the median of the rounds);
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
from benchmarks import node_cache  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import CRI_NAMESPACE, ContainerdClient  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import read_images, read_node  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
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


def native_path(rt, n):
    """Whether image_gc removes a pass of ``n`` images through containerd's images API on this runtime."""
    client = type(rt.client)(rt.endpoint)
    try:
        runtime = read_node(client, ("runtime",))["runtime"]
    finally:
        client.close()
    return n >= _image_gc.NATIVE_MIN_IMAGES and _image_gc.native_removal(runtime)


def native_floor(rt, ids):
    """Seconds the native path's floor takes on the images ``ids``: a Delete for every record of every image, all in
    flight at once, then one synchronous collection (no read, plan, ledger or container re-list). Then, untimed, a wait
    until the CRI lists none of them, so that the next set's run does not see them."""
    client = type(rt.client)(rt.endpoint)
    try:
        wanted = set(ids)
        names = [name for img in read_images(client) if img["id"] in wanted for name in _image_gc.record_names(img)]
        api = ContainerdClient(client)

        def remove():
            for fut in [api.delete_image_async(CRI_NAMESPACE, name) for name in names]:
                fut.result()
            api.collect_garbage(CRI_NAMESPACE, _image_gc.NATIVE_LEASE_PREFIX)

        seconds = timed(remove)[0]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and {img["id"] for img in read_images(client)} & wanted:
            time.sleep(0.05)
        return seconds
    finally:
        client.close()


EMPTY_REPEAT = 3  # each round's empty runs of each command (--empty-repeat)


def ansible_command(rt, _tmp, module, args):
    """The whole ``ansible localhost -m kubenode.gc.<module>`` command line and its environment."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    args = dict(args, cri_endpoint=rt.endpoint)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local", "-m", "kubenode.gc." + module, "-a", json.dumps(args)]
    return cmd, env


def module_command(rt, tmp, module, args):
    """The module process alone, as Ansible would start it on the node (its arguments in a file), without the controller."""
    path = os.path.join(tmp, "args-%s.json" % module)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": dict(args, cri_endpoint=rt.endpoint)}, f)
    env = dict(os.environ, PYTHONPATH=collections_path())
    return [sys.executable, "-m", "ansible_collections.kubenode.gc.plugins.modules." + module, path], env


_KEPT = {}  # (module, arguments) -> the AnsiballZ file kept for them


def ansiballz_command(rt, tmp, module, args):
    """The module process as Ansible starts it on the node: its AnsiballZ file (kept from one whole command run with
    ANSIBLE_KEEP_REMOTE_FILES, the arguments inside), run by the interpreter. Unlike module_command, the collection's
    code is imported from the zip, so Python compiles it on every run (no bytecode), as on a real node."""
    key = (module, json.dumps(dict(args, cri_endpoint=rt.endpoint), sort_keys=True))
    if key not in _KEPT:
        remote = tempfile.mkdtemp(prefix="kgc-ansiballz-", dir=tmp)
        cmd, env = ansible_command(rt, tmp, module, args)
        run_command((cmd, dict(env, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=remote)))
        found = [os.path.join(d, f) for d, _s, files in os.walk(remote) for f in files if f.startswith("AnsiballZ_")]
        if len(found) != 1:
            raise RuntimeError("expected one AnsiballZ file under %s, found %s" % (remote, found))
        _KEPT[key] = found[0]
    return [sys.executable, _KEPT[key]], dict(os.environ)


# What the controller does once per command (per task in a playbook) before any host runs a module: ansible-core's
# recursive_finder reads and parses (compile to an AST) every module_utils file the module imports, to ship them in
# the AnsiballZ zip. Timed in a fresh process, as a command pays it; its API is ansible-core 2.19's (the project venv).
PAYLOAD_BUILD = r"""
import datetime, gc, io, json, sys, time, zipfile
from ansible.plugins.loader import init_plugin_loader, module_loader
init_plugin_loader([sys.argv[2]])
from ansible.executor.module_common import recursive_finder
from ansible._internal._ansiballz import _builder
path = module_loader.find_plugin_with_context("kubenode.gc." + sys.argv[1]).plugin_resolved_path
with open(path, "rb") as f:
    data = f.read()
zf = zipfile.ZipFile(io.BytesIO(), "w")
gc.freeze()  # as the collection's action plugin does in the worker before the build (plugin_utils/_module_action.py)
start = time.perf_counter()
recursive_finder(sys.argv[1], "ansible_collections.kubenode.gc.plugins.modules." + sys.argv[1], data, zf,
                 datetime.datetime(2020, 1, 1), _builder.ExtensionManager())
seconds = time.perf_counter() - start
own = [i for i in zf.infolist() if i.filename.startswith("ansible_collections/kubenode/")]
print(json.dumps({"seconds": seconds, "files": len(own), "bytes": sum(i.file_size for i in own)}))
"""


def payload_builds(modules, repeat):
    """{module: {"seconds": [per run], "files": n, "bytes": n}}: ansible-core building each module's payload, ``repeat``
    times interleaved, each in a fresh process; None where this ansible-core's internals differ from 2.19's."""
    out = {m: {"seconds": []} for m in modules}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path())
    for _rep in range(repeat):
        for module in modules:
            proc = subprocess.run([sys.executable, "-c", PAYLOAD_BUILD, module, collections_path()], env=env,
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                return None
            row = json.loads(proc.stdout)
            out[module]["seconds"].append(row["seconds"])
            out[module].update(files=row["files"], bytes=row["bytes"])
    return out


def run_command(cmd_env):
    """Seconds the command takes; it must succeed."""
    cmd, env = cmd_env
    seconds, proc = timed(lambda: subprocess.run(cmd, env=env, capture_output=True, text=True, check=False))
    if proc.returncode or '"failed": true' in proc.stdout:
        raise RuntimeError("%s failed (%d):\n%s\n%s" % (" ".join(cmd[:6]), proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
    return seconds


def command_round(rt, tmp, round_, n, extra, out, empty_repeat=EMPTY_REPEAT):
    """One round of whole commands on a node holding only the sandbox image: cri_info (empty), image_gc prune and the
    default pass with nothing to remove, then image_gc prune of a fresh set of ``n``; each as the whole ansible command
    (``out["ansible"]``) and as the module process alone (``out["process"]``), appended per name."""
    ledger = os.path.join(tmp, "lc-%d.json" % round_)
    runs = (("cri_info", "cri_info", {}),
            ("empty_prune", "image_gc", dict(mode="prune", min_age="0s", ledger_path=ledger, **extra)),
            ("empty_default", "image_gc", dict(ledger_path=ledger, **extra)))
    for how, make in (("ansible", ansible_command), ("process", module_command), ("ansiballz", ansiballz_command)):
        # the empty runs differ by tens of milliseconds in commands of a second: each round's figure is the median of
        # empty_repeat runs of each, interleaved
        times = {name: [] for name, _module, _args in runs}
        for _rep in range(max(1, empty_repeat)):
            for name, module, args in runs:
                times[name].append(run_command(make(rt, tmp, module, args)))
        for name, values in times.items():
            out[how].setdefault(name, []).append(statistics.median(values))
            # and every run, for the fixed cost paired with the cri_info run made just before it
            out.setdefault("each", {}).setdefault(how, {}).setdefault(name, []).extend(values)
    for how, make in (("ansible", ansible_command), ("process", module_command)):
        import_set(rt, "bench-cmd-%s%d" % (how, round_), n)
        out[how].setdefault("prune", []).append(run_command(make(rt, tmp, "image_gc", dict(mode="prune", min_age="0s", ledger_path=ledger, **extra))))


def prune_rounds(rt, crictl, n, repeat, tmp, extra, empty_repeat=EMPTY_REPEAT):
    """``repeat`` rounds of crictl rmi --prune, the native path's floor (where image_gc takes it) and image_gc prune
    in-module, each on a fresh set of ``n`` images: {"crictl": [s], "module": [s], "ratios": [module / crictl],
    "floor": [s] (native path only), "removed": int, "calls": {rpc: n}} (calls of the last round)."""
    out = {"crictl": [], "module": [], "ratios": [], "ansible": {}, "process": {}, "ansiballz": {}}
    native = native_path(rt, n)
    for round_ in range(repeat):
        if crictl:
            import_set(rt, "bench-crictl%d" % round_, n)
            out["crictl"].append(timed(lambda: subprocess.run([crictl, "--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "rmi", "--prune"],
                                                              check=True, capture_output=True))[0])
        if native:
            out.setdefault("floor", []).append(native_floor(rt, import_set(rt, "bench-floor%d" % round_, n)))
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
        command_round(rt, tmp, round_, n, extra, out, empty_repeat)
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
    if rounds.get("floor"):
        print("native floor, Deletes + 1 GC     : %7.2f s  median of %s (every record's Delete in flight, one collection)" % (
            statistics.median(rounds["floor"]), _list(rounds["floor"])))
        if crictl:
            floor_ratios = [f / c for f, c in zip(rounds["floor"], rounds["crictl"])]
            print("native floor / crictl, same run  : %5.2f  median of %s (the least image_gc can reach through that API)" % (
                statistics.median(floor_ratios), _list(floor_ratios)))
        module_ratios = [m / f for m, f in zip(rounds["module"], rounds["floor"])]
        print("image_gc prune / native floor    : %5.2f  median of %s (image_gc's own cost above the API's)" % (
            statistics.median(module_ratios), _list(module_ratios)))
    for how, what in (("ansible", "whole ansible command"), ("process", "module process alone (bytecode cached)"),
                      ("ansiballz", "module process as Ansible starts it on the node (its AnsiballZ file: the collection from the zip, "
                                    "its code from the node cache when warm)")):
        runs = rounds[how]
        base = runs["cri_info"]
        above = {name: [v - b for v, b in zip(runs[name], base)] for name in ("empty_prune", "empty_default", "prune") if name in runs}
        print("%s, medians of the rounds (minus the same round's empty cri_info run):" % what)
        print("  cri_info, empty node            : %7.3f s  %s" % (statistics.median(base), _list(base, 3)))
        print("  image_gc prune, nothing to do   : %7.3f s  fixed cost above cri_info %+6.0f ms %s (target <= 30 ms)" % (
            statistics.median(runs["empty_prune"]), 1000 * statistics.median(above["empty_prune"]), _ms(above["empty_prune"])))
        print("  image_gc default, nothing to do : %7.3f s  fixed cost above cri_info %+6.0f ms %s" % (
            statistics.median(runs["empty_default"]), 1000 * statistics.median(above["empty_default"]), _ms(above["empty_default"])))
        each = rounds.get("each", {}).get(how)
        if each:
            # one command's time varies by more than the difference: each empty image_gc run paired with the cri_info
            # run made just before it, over every run of every round, gives the steadier figure
            paired = sorted(v - b for v, b in zip(each["empty_prune"], each["cri_info"]))
            quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
            print("  image_gc prune, nothing to do   : fixed cost above cri_info %+6.0f ms, median of %d paired runs (quartiles %+.0f, %+.0f)" % (
                1000 * statistics.median(paired), len(paired), 1000 * quartiles[0], 1000 * quartiles[2]))
        if "prune" not in runs:
            continue
        print("  image_gc prune of %4d          : %7.3f s  minus cri_info %5.3f s %s" % (
            n, statistics.median(runs["prune"]), statistics.median(above["prune"]), _list(above["prune"], 3)))
        if crictl:
            ratios = [a / c for a, c in zip(above["prune"], rounds["crictl"])]
            print("  (prune - cri_info) / crictl     : %5.2f  median of the rounds' ratios %s (target <= 1)" % (statistics.median(ratios), _list(ratios)))


def print_payload_builds(builds):
    """The controller's share of the whole command's fixed cost: building each module's payload."""
    if builds is None:
        print("controller building the payload  : not measured (this ansible-core's recursive_finder is not 2.19's)")
        return
    base = statistics.median(builds["cri_info"]["seconds"])
    print("controller building the payload, once per command (per task in a playbook), medians of %s:" % len(builds["cri_info"]["seconds"]))
    for module, row in builds.items():
        print("  %-30s : %6.0f ms %s, %d files, %d KB of the collection%s" % (
            module, 1000 * statistics.median(row["seconds"]), _ms(row["seconds"]).replace("+", ""), row["files"], row["bytes"] // 1024,
            "" if module == "cri_info" else "; %+.0f ms above cri_info" % (1000 * (statistics.median(row["seconds"]) - base))))


def _ms(values):
    return "[" + ", ".join("%+.0f" % (1000 * v) for v in values) + "]"


def _list(values, digits=2):
    return "[" + ", ".join("%.*f" % (digits, v) for v in values) + "]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=None, help="images per set (default 500, 200 with --short)")
    parser.add_argument("--repeat", type=int, default=None, help="rounds of crictl and image_gc prune (default 3)")
    parser.add_argument("--parallelism", type=int, default=None, help="image_gc's parallelism (default: the module's)")
    parser.add_argument("--runtime", default=runtimes.DEFAULT, choices=runtimes.NAMES)
    parser.add_argument("--short", action="store_true", help="only the prune rounds against crictl (the test command's mode)")
    parser.add_argument("--empty-repeat", type=int, default=EMPTY_REPEAT, help="empty runs of each command per round (default %d)" % EMPTY_REPEAT)
    parser.add_argument("--cri", action="store_true", help="image_gc removes through the CRI even where containerd's images API is proven")
    node_cache.add_argument(parser)
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
        print(node_cache.apply(args.cache, tmp))
        if args.cache == "warm":  # unmeasured: each command's first run on the node, which fills its cache
            for module, module_args in (("cri_info", {}), ("image_gc", dict(mode="prune", min_age="0s", ledger_path=os.path.join(tmp, "warm.json")))):
                run_command(ansible_command(rt, tmp, module, module_args))
        if args.short:
            print_rounds(prune_rounds(rt, crictl, n, repeat, tmp, extra, args.empty_repeat), n, crictl)
            print_payload_builds(payload_builds(("cri_info", "image_gc"), repeat))
            return 0
        ids = import_set(rt, "bench-raw", n)
        out["raw"] = timed(lambda: [rt.client.remove_image(i) for i in ids])[0]

        rounds = prune_rounds(rt, crictl, n, repeat, tmp, extra, args.empty_repeat)
        out["module"] = statistics.median(rounds["module"])
        if crictl:
            out["crictl"] = statistics.median(rounds["crictl"])
            # the same kind of images as the threshold pass below (every layer their own), so both delete the same bytes
            import_set(rt, "bench-crictl-half", half, size=64 << 10, share_base=False)
            out["crictl_half"] = timed(lambda: subprocess.run([crictl, "--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "rmi", "--prune"],
                                                              check=True, capture_output=True))[0]

        out["ansible"] = statistics.median(rounds["ansible"]["prune"])

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
    print_payload_builds(payload_builds(("cri_info", "image_gc"), max(repeat, 5)))
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
