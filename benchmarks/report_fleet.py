# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): the fleet audit report for N synthetic nodes, with a history of earlier audits.

    python -m benchmarks.report_fleet [--nodes 1000] [--history 30] [--out DIR]

Feeds the audit_report filter N node dicts shaped like the audit playbook's (registered results of cri_info,
kubelet_config, runtime_config, check-mode image_gc and container_gc, drift) with realistic variety: four
runtimes, capacities from 40 GiB to 500 GiB, usage from idle to past the eviction threshold, findings, drift,
unreachable nodes and failed parts, 20 to 80 images per node from a shared pool of releases. Times the
filter, the HTML and Markdown renderings and the JSON dump, prints the sizes, and writes the files to --out.
The test tests/report/test_report_browser.py uses the same generator and opens the page in Chromium.
"""

import argparse
import json
import os
import random
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from devtools.collection import make_importable  # noqa: E402  pylint: disable=wrong-import-position

make_importable()

from ansible_collections.kubenode.gc.plugins.filter.audit_report import audit_report  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_fleet, _report_html, _report_md  # noqa: E402  pylint: disable=wrong-import-position

GiB = 1 << 30
MiB = 1 << 20
RUNTIMES = [("containerd", "1.6.20~ds1", "unix:///run/containerd/containerd.sock", "registry.k8s.io/pause:3.6", 0.35),
            ("containerd", "1.7.24", "unix:///run/containerd/containerd.sock", "registry.k8s.io/pause:3.8", 0.3),
            ("containerd", "2.1.9", "unix:///run/containerd/containerd.sock", "registry.k8s.io/pause:3.10", 0.2),
            ("cri-o", "1.37.0", "unix:///var/run/crio/crio.sock", "registry.k8s.io/pause:3.10", 0.15)]
TEAMS = ["shop", "search", "payments", "batch", "ml", "platform", "data", "edge", "ads", "identity"]
KUBELET_FINDINGS = [
    ("warning", "eviction_before_gc", "evictionHard imagefs.available 15% is reached before the image GC high threshold 90%: pods are evicted first.", 0.08),
    ("info", "max_age_disabled", "imageMaximumGCAge is 0s: unused images are removed only under disk pressure.", 0.55),
    ("error", "low_not_below_high", "imageGCLowThresholdPercent 90 must be less than imageGCHighThresholdPercent 85.", 0.004),
]
RUNTIME_FINDINGS = [
    ("warning", "root_not_on_imagefs", "containerd root /var/lib/containerd is not on the image filesystem the runtime reports.", 0.03),
    ("info", "config_version_1", "The containerd configuration uses version 1; containerd 2.x needs version 2 or 3.", 0.12),
    ("warning", "sandbox_image_mismatch", "The configured sandbox image registry.k8s.io/pause:3.6 differs from the running one.", 0.05),
]


def image_pool(rng):
    """Releases of each team's services: (ref, size), newest first per service."""
    pool = {}
    for team in TEAMS:
        for svc in range(rng.randint(3, 8)):
            name = "registry.example/%s/svc-%d" % (team, svc)
            size = rng.choice([40, 80, 150, 300, 600, 1200]) * MiB
            pool[name] = [("%s:1.%d.%d" % (name, minor, patch), int(size * rng.uniform(0.9, 1.1)))
                          for minor in range(12, 0, -1) for patch in (1, 0)]
    pool["registry.k8s.io/coredns/coredns"] = [("registry.k8s.io/coredns/coredns:v1.11.1", 60 * MiB)]
    pool["quay.io/prometheus/node-exporter"] = [("quay.io/prometheus/node-exporter:v1.8.2", 25 * MiB)]
    pool["docker.io/nvidia/cuda"] = [("docker.io/nvidia/cuda:12.4.1-runtime", 3200 * MiB), ("docker.io/nvidia/cuda:12.2.0-runtime", 3100 * MiB)]
    return pool


def synthetic_node(rng, host, pool, usage_shift=0):
    """One node dict as the audit playbook builds it."""
    if rng.random() < 0.015:
        return dict(host=host, error="Failed to connect to the host via ssh: ssh: connect to host %s port 22: Connection timed out" % host,
                    cri_info={"unreachable": True, "msg": "unreachable"}, kubelet_config=None, runtime_config=None,
                    image_gc_policy=None, image_gc_prune=None, container_gc=None, drift=[], metrics_file=None)
    name, version, endpoint, pause = rng.choices(RUNTIMES, weights=[r[4] for r in RUNTIMES])[0][:4]
    capacity = rng.choice([40, 50, 100, 100, 200, 500]) * GiB
    high, low = (85, 80) if rng.random() < 0.8 else (90, 85)
    usage = min(99, max(5, int(rng.betavariate(2.2, 2.0) * 100) + usage_shift))
    available = capacity * (100 - usage) // 100
    images = [{"id": "sha256:pause-%s" % pause[-4:], "repo_tags": [pause], "repo_digests": [], "size": 300000, "pinned": True,
               "sandbox_image": True, "in_use": True, "used_by": []}]
    in_use_refs = set()
    services = rng.sample(sorted(pool), rng.randint(8, 24))
    for svc in services:
        versions = pool[svc][:rng.randint(1, 4)]
        for i, (ref, size) in enumerate(versions):
            used = i == 0 and rng.random() < 0.85
            images.append({"id": "sha256:%08x" % zlib.crc32(ref.encode()), "repo_tags": [ref], "repo_digests": [], "size": size,
                           "pinned": False, "sandbox_image": False, "in_use": used, "used_by": ["c-%s" % ref] if used else []})
            if used:
                in_use_refs.add(ref)
    if rng.random() < 0.05:
        images.append({"id": "sha256:dangling-%s" % host, "repo_tags": [], "repo_digests": ["registry.example/ml/train@sha256:abc"],
                       "size": 2 * GiB, "pinned": False, "sandbox_image": False, "in_use": False, "used_by": []})
    unused = [i for i in images if not i["in_use"]]
    over = usage >= high
    bytes_to_free = max(0, capacity - available - capacity * low // 100) if over else 0
    policy_removed, freed = [], 0
    for img in sorted(unused, key=lambda i: i["size"]):
        if freed >= bytes_to_free:
            break
        policy_removed.append(img)
        freed += img["size"]

    def gc_result(removed, insufficient=False):
        return {"changed": bool(removed), "usage_before": usage, "usage_after": usage, "bytes_to_free": bytes_to_free,
                "bytes_freed_estimated": sum(r["size"] for r in removed), "bytes_freed_measured": None, "target_reached": not insufficient,
                "insufficient": insufficient, "errors": [], "kept": {},
                "removed": [{"id": r["id"], "repo_tags": r["repo_tags"], "size": r["size"], "reason": "space",
                             "first_detected": "2026-11-01T00:00:00Z", "last_used": None} for r in removed]}

    kfind = [{"severity": s, "code": c, "message": m} for s, c, m, p in KUBELET_FINDINGS if rng.random() < p]
    rfind = [{"severity": s, "code": c, "message": m} for s, c, m, p in RUNTIME_FINDINGS if rng.random() < p]
    drift = []
    if rng.random() < 0.3:
        drift.append({"component": "kubelet", "key": "imageMaximumGCAge", "desired": "168h0m0s", "actual": rng.choice(["0s", "0s", "720h0m0s"])})
    if rng.random() < 0.06:
        drift.append({"component": "kubelet", "key": "imageGCHighThresholdPercent", "desired": 85, "actual": high if high != 85 else 95})
    if name == "containerd" and pause != "registry.k8s.io/pause:3.10" and rng.random() < 0.4:
        drift.append({"component": "containerd", "key": "sandbox_image", "desired": "registry.k8s.io/pause:3.10", "actual": pause})
    eviction = "15%" if rng.random() < 0.9 else "10Gi"
    node = dict(
        host=host, error=None, metrics_file=None, drift=drift,
        cri_info={"changed": False, "runtime": {"name": name, "version": version, "endpoint": endpoint, "sandbox_image": pause},
                  "imagefs": [{"kind": "image", "mountpoint": "/var/lib/containerd" if name == "containerd" else "/var/lib/containers/storage",
                               "capacity_bytes": capacity, "available_bytes": available, "used_bytes": capacity - available - GiB,
                               "usage_percent": usage}],
                  "images": images, "containers": [{"id": "c%d" % i} for i in range(rng.randint(10, 80))]},
        kubelet_config={"changed": False, "findings": kfind,
                        "effective": {"imageGCHighThresholdPercent": high, "imageGCLowThresholdPercent": low,
                                      "evictionHard": {"imagefs.available": eviction, "nodefs.available": "10%"}}},
        runtime_config={"changed": False, "findings": rfind},
        image_gc_policy=gc_result(policy_removed, insufficient=over and freed < bytes_to_free),
        image_gc_prune=gc_result(unused),
        container_gc={"changed": False, "removed_containers": [{"id": "x"}] * rng.randint(0, 12), "removed_sandboxes": [], "errors": []},
    )
    node["disk_usage"] = synthetic_disk_usage(host, name, capacity - available, images)
    if rng.random() < 0.01:
        node["image_gc_prune"] = {"failed": True, "msg": "CRI ImageService.ListImages: deadline exceeded after 30s."}
    if rng.random() < 0.01:
        node["runtime_config"] = {"skipped": True, "skip_reason": "Conditional result was False"}
    return node


def synthetic_disk_usage(host, runtime, used, images):
    """A kubenode.gc.disk_usage result for one node (its own random stream: the rest of the fleet stays as it was)."""
    rng = random.Random(zlib.crc32(host.encode()))
    k8s = sum(i["size"] for i in images)
    sizes = {"k8s_images": min(k8s, used // 2), "writable_layers": rng.randint(0, 2 * GiB), "container_logs": rng.randint(0, 512 * MiB)}
    if runtime == "containerd":
        sizes.update(other_namespace_images=rng.choice([0, 0, 0, rng.randint(100 * MiB, 8 * GiB)]),
                     stale_ingests=rng.choice([0] * 9 + [rng.randint(MiB, GiB)]), leased=rng.choice([0] * 4 + [rng.randint(MiB, 2 * GiB)]),
                     unreferenced_snapshots=rng.choice([0] * 6 + [rng.randint(10 * MiB, 20 * GiB)]))
    total = sum(sizes.values())
    if total > used:  # the synthetic sizes never add up to more than the used bytes
        sizes = {k: v * used // total for k, v in sizes.items()}
    sizes["unaccounted"] = used - sum(sizes.values())
    objects = {
        "k8s_images": [{"namespace": "k8s.io", "name": i["repo_tags"][0] if i["repo_tags"] else None, "id": i["id"], "bytes": i["size"]}
                       for i in sorted(images, key=lambda i: -i["size"])[:10]],
        "other_namespace_images": [{"namespace": "moby", "name": "docker.io/library/golang:1.23", "id": "sha256:%08x" % rng.getrandbits(32),
                                    "bytes": sizes.get("other_namespace_images", 0)}],
        "writable_layers": [{"namespace": "default", "id": "c-%s-%d" % (host, n), "bytes": sizes["writable_layers"] // 3} for n in range(3)],
        "container_logs": [{"namespace": "default", "name": "default_web-%d" % n, "bytes": sizes["container_logs"] // 2} for n in range(2)],
        "stale_ingests": [{"namespace": "k8s.io", "id": "ingest-%s" % host, "bytes": sizes.get("stale_ingests", 0), "age_seconds": 90000}],
        "leased": [{"namespace": "k8s.io", "id": "lease-%s" % host, "bytes": sizes.get("leased", 0), "expired": rng.random() < 0.5}],
        "unreferenced_snapshots": [{"namespace": "k8s.io", "id": "snap-%s" % host, "bytes": sizes.get("unreferenced_snapshots", 0)}],
    }
    categories = {}
    for name in ("k8s_images", "other_namespace_images", "writable_layers", "container_logs", "stale_ingests", "leased", "unreferenced_snapshots",
                 "unaccounted"):
        if name not in sizes:  # cri-o: not visible
            categories[name] = None
            continue
        categories[name] = {"bytes": sizes[name], "objects": objects.get(name, []) if sizes[name] else []}
    return {"changed": False, "used_bytes": used, "categories": categories, "nodefs": None}


def synthetic_nodes(n=1000, seed=16, usage_shift=0):
    """N node dicts; the same seed gives the same fleet (usage_shift moves every node's usage, for history)."""
    rng = random.Random(seed)
    pool = image_pool(random.Random(seed))
    return [synthetic_node(rng, "node-%04d" % i, pool, usage_shift) for i in range(n)]


def synthetic_history(report, points=30, seed=16):
    """History points of ``points`` earlier daily audits of the fleet of ``report``: each node's usage drifts up towards today."""
    rng = random.Random(seed)
    today = _report_fleet.history_point(report)
    out = []
    for day in range(points):
        back = points - day
        usage = {host: max(1, min(99, value - back // 3 + rng.randint(-2, 2))) for host, value in today["usage"].items()}
        out.append(dict(generated_at="2026-11-%02dT06:00:00Z" % (21 - back) if back < 21 else "2026-10-%02dT06:00:00Z" % (52 - back),
                        nodes=today["nodes"], usage=usage, usage_mean=round(sum(usage.values()) / len(usage), 1), usage_max=max(usage.values()),
                        reclaimable_policy=int(today["reclaimable_policy"] * (1 - back / 60.0)),
                        reclaimable_prune=int(today["reclaimable_prune"] * (1 - back / 90.0)), over_high=None))
    return out


def build(n=1000, history_points=30, generated_at="2026-11-22T06:00:00Z"):
    """Report, HTML and Markdown of n synthetic nodes with ``history_points`` earlier audits, and the seconds each took."""
    nodes = synthetic_nodes(n)
    times = {}
    start = time.perf_counter()
    report = audit_report(nodes, generated_at=generated_at, policy={"image_gc_high_threshold_percent": 85, "image_maximum_gc_age": "168h"})
    times["audit_report"] = time.perf_counter() - start
    history = synthetic_history(report, history_points)
    start = time.perf_counter()
    text_json = json.dumps(report, indent=2, sort_keys=True)
    times["json"] = time.perf_counter() - start
    start = time.perf_counter()
    # what the audit_history lookup does: read the earlier report.json files (here: this one, as often as there is history)
    for unused in range(history_points):  # pylint: disable=unused-variable
        _report_fleet.history_point(json.loads(text_json))
    times["history_read"] = time.perf_counter() - start
    start = time.perf_counter()
    html = _report_html.render(report, history, history_note="History: <report dir>/history.")
    times["html"] = time.perf_counter() - start
    start = time.perf_counter()
    md = _report_md.render(report, history)
    times["markdown"] = time.perf_counter() - start
    return report, {"json": text_json, "html": html, "md": md}, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--history", type=int, default=30)
    parser.add_argument("--out", default="tests/output/report-bench")
    args = parser.parse_args()
    report, texts, times = build(args.nodes, args.history)
    os.makedirs(args.out, exist_ok=True)
    for ext, text in texts.items():
        with open(os.path.join(args.out, "report." + ext), "w", encoding="utf-8") as f:
            f.write(text)
    total = sum(times.values())
    print("%d synthetic nodes, %d earlier audits in the trends" % (args.nodes, args.history))
    for key, seconds in times.items():
        print("  %-13s %6.3f s" % (key, seconds))
    print("  %-13s %6.3f s  (budget 5 s)" % ("total", total))
    for ext, text in texts.items():
        print("  report.%-5s %8.2f MiB%s" % (ext, len(text.encode()) / MiB, "  (budget 5 MiB)" if ext == "html" else ""))
    groups = len(_report_fleet.findings_by_code(report["nodes"]))
    print("  health: %s; findings groups: %d; image refs: %d" % (report["summary"]["nodes_by_health"], groups, report["summary"]["image_refs"]))
    print("written to %s" % args.out)


if __name__ == "__main__":
    main()
