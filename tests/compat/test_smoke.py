# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ansible-core matrix smoke test: the modules and the audit playbook under one ansible-core.

scripts/ansible-matrix.sh runs this once per supported ansible-core version with:

* KUBENODE_GC_COMPAT_ANSIBLE_PLAYBOOK: the ansible-playbook command of that version (words split
  on spaces, so a wrapper that enters another root file system works too);
* KUBENODE_GC_COMPAT_PYTHON: the managed node's interpreter;
* KUBENODE_GC_COMPAT_COLLECTIONS: a collections path with the built collection installed.

Without them it uses the project venv's ansible-playbook and this checkout.
"""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from devtools.collection import collections_path
from devtools.containerd import EmbeddedContainerd
from devtools.images import ImageSpec
from devtools.kubelet_lock import held as kubelet_process_lock

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def tags(runtime):
    return {t for img in runtime.client.list_images() for t in img.repo_tags}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    # the containerd work dir is under the temp dir, which a chroot wrapper shares
    runtime = EmbeddedContainerd(workdir=str(tmp_path_factory.mktemp("ctrd")), imagefs_size="64M")
    runtime.start()
    try:
        runtime.import_images(
            [
                ImageSpec("app:1", size=MIB),
                ImageSpec("old:1", size=MIB),
                ImageSpec("junk-a:1", size=MIB),
                ImageSpec("junk-b:1", size=MIB),
            ]
        )
        pod = runtime.run_pod("smoke", uid="uid-smoke")
        runtime.add_container(pod, "app", "app:1", "running")
        dead = [runtime.add_container(pod, "job", "old:1", "exited", attempt=n) for n in (0, 1)]
        yield runtime, dead
    finally:
        runtime.stop()


@pytest.fixture(scope="module")
def run(node, tmp_path_factory):
    runtime, dead = node
    work = tmp_path_factory.mktemp("smoke")
    kubelet = work / "kubelet-config.yaml"
    kubelet.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n# kept\nimageGCHighThresholdPercent: 85\n")
    (work / "containers").mkdir()
    python = os.environ.get("KUBENODE_GC_COMPAT_PYTHON", sys.executable)
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": python,
        "kubenode_gc_cri_endpoint": runtime.endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_container_logs_dir": str(work / "containers"),
        "kubenode_gc_ledger_path": "",
        "kubenode_gc_report_dir": str(work / "report"),
        "kubelet_gc_config_path": str(kubelet),
        # what the roles enforce, as the audit measures drift against it (kubenode.gc.role_settings): a template, which
        # ansible-core 2.16 to 2.18 hand to lookups unrendered, and a boolean written as a string, as -e gives it
        "kubelet_gc_image_gc_high_threshold_percent": "{{ 70 + 5 }}",
        "kubelet_gc_image_gc_low_threshold_percent": 65,
        "containerd_storage_discard_unpacked_layers": "true",
        "containerd_storage_config_path": runtime.config_path,
        "smoke_results": str(work / "results.json"),
        "kubenode_gc_cleanup_image_mode": "prune",
        "kubenode_gc_cleanup_history_dir": str(work / "history"),
    }
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"smoke-node": host}}}))
    command = shlex.split(os.environ.get("KUBENODE_GC_COMPAT_ANSIBLE_PLAYBOOK", os.path.join(os.path.dirname(sys.executable), "ansible-playbook")))
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=os.environ.get("KUBENODE_GC_COMPAT_COLLECTIONS") or collections_path(),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        KUBENODE_GC_CACHE_DIR=str(work / "node-cache"),  # the modules keep their compiled code here (_zipimport)
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a node
    # the integration tests may run at the same time (scripts/test.sh): never beside their fake kubelet process
    with kubelet_process_lock():
        proc = subprocess.run(command + ["-i", str(inventory), os.path.join(HERE, "smoke.yml")], env=env, capture_output=True, text=True, check=False)
    version = subprocess.run(command + ["--version"], env=env, capture_output=True, text=True, check=False).stdout
    results = json.loads((work / "results.json").read_text()) if (work / "results.json").exists() else None
    return {"proc": proc, "version": version, "results": results, "work": work, "kubelet": kubelet, "runtime": runtime, "dead": dead}


def test_playbook_runs_clean_without_warnings(run):
    proc = run["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    # no "does not support" / deprecation warnings from our collection on this ansible-core
    assert "[WARNING]" not in output, output
    assert "[DEPRECATION WARNING]" not in output, output
    print(run["version"].splitlines()[0])


def test_the_modules_keep_their_compiled_code_for_the_next_run(run):
    cache = run["work"] / "node-cache"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    named = [(re.fullmatch(r"bytecode\.ansible_(?:kubenode\.gc\.)?(\w+)_payload\.zip\.\w+-\d+", p.name), p) for p in cache.iterdir()]
    kept = {m.group(1): p for m, p in named if m}
    # one file per module run (the async cri_info and the check-mode image_gc read what the first runs kept); every
    # later result in this playbook came from that code
    assert {"cri_info", "image_gc", "container_gc", "kubelet_config", "node_audit"} <= set(kept), sorted(kept)
    for path in kept.values():
        assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o600 and path.stat().st_size > 10000
    # and the audit's disk usage kept the sizes containerd stored for its committed snapshots (containerd/_usage_cache)
    sizes = [p for p in cache.iterdir() if re.fullmatch(r"usage\.[0-9a-f]{16}\.json", p.name)]
    assert len(sizes) == 1 and sizes[0].stat().st_uid == 0 and sizes[0].stat().st_mode & 0o777 == 0o600
    assert json.loads(sizes[0].read_text())["snapshots"]
    assert sorted(cache.iterdir()) == sorted(list(kept.values()) + sizes)  # nothing else


def test_cri_info(run):
    info = run["results"]["info"]
    assert info["runtime"]["name"] == "containerd"
    assert {"docker.io/library/app:1", "docker.io/library/junk-a:1"} <= {t for i in info["images"] for t in i["repo_tags"]}
    assert len(info["containers"]) == 3
    # the same read through async (ansible-core's async wrapper around the module, via the collection's action plugin)
    again = run["results"]["async_info"]
    assert again.get("finished") == 1 and again["runtime"] == info["runtime"], again
    assert sorted(i["id"] for i in again["images"]) == sorted(i["id"] for i in info["images"])


def test_image_gc_check_then_real(run):
    res, runtime = run["results"], run["runtime"]
    junk = {"docker.io/library/junk-a:1", "docker.io/library/junk-b:1"}
    plan = res["plan"]
    assert plan["changed"] is True and {t for r in plan["removed"] for t in r["repo_tags"]} == junk
    # check mode removed nothing
    assert junk <= {t for i in res["after_check"]["images"] for t in i["repo_tags"]}
    prune = res["prune"]
    assert prune["changed"] is True and [r["id"] for r in prune["removed"]] == [r["id"] for r in plan["removed"]]
    assert tags(runtime) == {"docker.io/library/app:1", "docker.io/library/old:1", runtime.sandbox_image}


def test_container_gc(run):
    res, runtime = run["results"]["container_gc"], run["runtime"]
    older, newer = run["dead"]
    assert res["changed"] is True and [c["id"] for c in res["removed_containers"]] == [older]
    left = {c.id for c in runtime.client.list_containers()}
    assert older not in left and newer in left and len(left) == 2


def test_kubelet_config(run):
    res = run["results"]["kubelet_config"]
    assert res["changed"] is True
    text = run["kubelet"].read_text()
    assert "imageGCHighThresholdPercent: 75" in text and "imageGCLowThresholdPercent: 60" in text and "# kept" in text


def test_audit_report(run):
    report_dir = run["work"] / "report"
    report = json.loads((report_dir / "report.json").read_text())
    (node,) = report["nodes"]
    assert node["host"] == "smoke-node" and node["status"] == "ok", node
    assert node["runtime"]["name"] == "containerd"
    # the kubelet_config task set 75 and 60: only the low threshold differs from the role variables
    drift = {(d["component"], d["key"]): (d["desired"], d["actual"]) for d in node["drift"]}
    assert drift[("kubelet", "imageGCLowThresholdPercent")] == (65, 60), node["drift"]
    assert ("kubelet", "imageGCHighThresholdPercent") not in drift, node["drift"]
    assert drift[("containerd", "discard_unpacked_layers")][0] is True, node["drift"]
    assert (report_dir / "report.html").stat().st_size > 0


def test_cleanup_history_record(run):
    """The cleanup playbook ran node_cleanup (prune mode: every step) and wrote the node's history record."""
    records = sorted((run["work"] / "history").glob("*.json"))
    assert len(records) == 1, run["proc"].stdout[-4000:]
    record = json.loads(records[0].read_text())
    assert record["host"] == "smoke-node" and record["status"] == "cleaned" and record.get("in_progress") is None, record
    assert record["policy"]["image_mode"] == "prune"
