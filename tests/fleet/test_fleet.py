# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet playbooks on five real node containers over the community.docker.docker connection.

node-a  cri-o 1.37 (split image filesystem: imagestore), filled over the high threshold
node-b  containerd 1.6 (Debian 12), filled well under it
node-c  containerd 2.x (config version 3), over the policy's threshold but its kubelet configuration
        drifted from the policy (95/90): under its own threshold, so the cleanup leaves it alone
node-d  containerd 1.7, stopped: must show up as failed without stopping the waves
node-c2 Docker Engine (Debian 12's docker.io) behind cri-dockerd 0.4.3, over the threshold, with a container
        outside Kubernetes (docker run) whose image the cleanup must keep (named to come before node-d: the cleanup's
        waves of one node stop after node-d fails)

Every node runs a pod whose running and exited containers use images that must survive. Every image reaches a node as
on a Kubernetes node: pulled through its CRI's PullImage from the harness's registry (devtools.nodes), and the image
outside Kubernetes with node-c2's docker CLI. Where the runtimes differ (image ids, the image filesystem, the runtime pinning its sandbox
image) each node is held to its runtime's expectation. Without cri-o binaries
(../shared/runtimes or KUBENODE_GC_CRIO_DIR) node-a runs containerd 1.6, and a loud line says so.
The tests run in order: configure, audit, cleanup, check-mode cleanup.
"""

import html.parser
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from devtools.fetch import cri_dockerd_binary, crio_dir
from devtools.images import ImageSpec
from devtools.nodes import make_node, node_images, remove_leftover_nodes

BIN = os.path.dirname(sys.executable)
MIB = 1 << 20
HIGH, LOW = 80, 50
# the fleet's policy and test speed-ups, the same whatever the connection (test_fleet_ssh.py uses them too)
POLICY_VARS = {
    "ansible_python_interpreter": "/usr/bin/python3",
    "kubelet_gc_image_gc_high_threshold_percent": HIGH,
    "kubelet_gc_image_gc_low_threshold_percent": LOW,
    "kubelet_gc_image_minimum_gc_age": "1s",
    "kubelet_gc_restart": False,
    "kubenode_gc_container_min_age": "0s",
    "kubenode_gc_cleanup_image_min_age": "0s",
}
NODES = {"node-a": 86, "node-b": 25, "node-c": 84, "node-d": 40, "node-c2": 86}
RUNTIMES = {"node-a": "crio", "node-b": "containerd-1.6", "node-c": "containerd-2.1", "node-d": "containerd-1.7", "node-c2": "cri-dockerd"}
if crio_dir() is None:
    RUNTIMES["node-a"] = "containerd-1.6"
    print("\n!!!! cri-o was NOT tested in the fleet: no ../shared/runtimes and KUBENODE_GC_CRIO_DIR unset !!!!", file=sys.stderr)
if cri_dockerd_binary() is None:
    del NODES["node-c2"], RUNTIMES["node-c2"]
    print("\n!!!! cri-dockerd was NOT tested in the fleet: no cri-dockerd in ../shared/runtimes or no Debian docker.io !!!!", file=sys.stderr)
# the Docker node: its containerd (Docker's) also listens on the default socket, so the inventory names cri-dockerd's, and
# no runtime role applies (runtime_config reads dockerd's configuration, never edits it)
HOST_VARS = {"node-c2": {"kubenode_gc_cri_endpoint": "unix:///run/cri-dockerd.sock", "kubenode_gc_configure_runtime": "none"}}
OUTSIDE_IMAGE = "registry.example/ci-runner:1"  # node-c2: a docker run container outside Kubernetes uses it
# what the CRI says on each runtime
RUNTIME_NAME = {"crio": "cri-o", "cri-dockerd": "docker"}
HEX64 = r"[0-9a-f]{64}"
IMAGE_ID = {"crio": r"^%s$" % HEX64}  # bare hex; containerd: sha256:<hex>
DRIFTED_KUBELET = """# hand-edited on node-c
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
"""
KUBELET = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
"""


def usage(node):
    """The kubelet's imagefs usage percent, from statvfs inside the node."""
    out = node.exec("stat", "-f", "-c", "%b %a %S", node.imagefs_root)
    blocks, avail, size = (int(x) for x in out.split())
    return 100 - (avail * 100 // blocks)


def image_ids(node):
    return {img.id for img in node.client.list_images()}


def fill(node, percent):
    """Pod with a running and an exited container (their images are in use), then unused images up to percent.

    The first filler image measures what one costs on this runtime (containerd keeps the layer and its
    snapshot, cri-o the layer once); the next ones come in batches sized to most of what is left."""
    node.pull_images([ImageSpec("registry.example/app:1", size=2 * MIB), ImageSpec("registry.example/job:1", size=2 * MIB)])
    pod = node.run_pod("web", namespace="prod", uid="uid-web-" + node.name)
    node.add_container(pod, "app", "registry.example/app:1", "running")
    node.add_container(pod, "job", "registry.example/job:1", "exited")
    n, per_image = 0, None
    now = usage(node)
    # dockerd downloads a pull's compressed layers into its data root before it unpacks them: smaller batches
    share = 0.35 if node.kind == "docker" else 0.7
    while now < percent:
        batch = 1 if not per_image else max(1, int((percent - now) * share / per_image))
        node.pull_images([ImageSpec("registry.example/old/tool-%d:1" % (n + i), size=3 * MIB, share_base=False) for i in range(1, batch + 1)])
        n += batch
        before, now = now, usage(node)
        if per_image is None:
            per_image = max(now - before, 0.5)
    return n


class Fleet:
    def __init__(self, workdir, collections_path):
        self.workdir = workdir
        self.collections_path = collections_path
        self.nodes = {}
        self.inventory = os.path.join(workdir, "inventory.yml")
        self.runs = 0

    def write_inventory(self):
        hosts = {name: dict(HOST_VARS.get(name, {}), ansible_host=node.name) for name, node in self.nodes.items()}
        group_vars = dict(POLICY_VARS, ansible_connection="community.docker.docker", kubenode_gc_report_dir=os.path.join(self.workdir, "report"))
        with open(self.inventory, "w", encoding="utf-8") as f:
            yaml.safe_dump({"all": {"children": {"nodes": {"hosts": hosts, "vars": group_vars}}}}, f)

    def playbook(self, name, *args, env=None):
        self.runs += 1
        cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc." + name, "-i", self.inventory] + list(args)
        run_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=self.collections_path, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                       ANSIBLE_HOST_KEY_CHECKING="0", PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
        run_env.update(env or {})
        proc = subprocess.run(cmd, cwd=self.workdir, env=run_env, capture_output=True, text=True, check=False)
        with open(os.path.join(self.workdir, "run-%d-%s.log" % (self.runs, name)), "w", encoding="utf-8") as f:
            f.write(proc.stdout + proc.stderr)
        return proc


def add_node(fleet, name, container, image, runtime, group, kubelet=KUBELET):
    """Start node container ``container`` as the fleet's ``name``, with a kubelet configuration file holding ``kubelet``."""
    node = make_node(container, image, runtime=runtime, imagefs_size="192M", group=group)
    fleet.nodes[name] = node
    node.start()
    node.exec("mkdir", "-p", "/var/lib/kubelet")
    node.exec("sh", "-c", "printf '%s' \"$1\" > /var/lib/kubelet/config.yaml", "sh", kubelet)
    return node


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, collections_path):
    images = node_images(sorted(set(RUNTIMES.values())))
    remove_leftover_nodes("fleet")
    fleet = Fleet(str(tmp_path_factory.mktemp("fleet")), collections_path)
    try:
        for name, percent in NODES.items():
            node = add_node(fleet, name, "kgc-fleet-" + name, images[RUNTIMES[name]], RUNTIMES[name], "fleet",
                            kubelet=DRIFTED_KUBELET if name == "node-c" else KUBELET)
            if RUNTIMES[name] == "cri-dockerd":
                node.pull_with_docker([ImageSpec(OUTSIDE_IMAGE, size=MIB)])
                node.exec("docker", "run", "-d", "--name", "ci-runner", "--network", "none", OUTSIDE_IMAGE,
                          "-c", "busybox head -c 1048576 /dev/urandom > /scratch; exec sleep 2147483647")
            node.filler_images = fill(node, percent)
        fleet.write_inventory()
        yield fleet
    finally:
        for node in fleet.nodes.values():
            node.stop()


def test_nodes_pulled_their_images(fleet):
    """Each runtime's own tool (ctr, crictl, docker) lists the pod's image under the repo digest of the manifest the
    harness's registry serves: it was pulled, not imported (an import records no such digest, or another one)."""
    for name, node in fleet.nodes.items():
        digests = node.image_refs()["digests"]
        for tag in ("registry.example/app:1", "registry.example/job:1") + ((OUTSIDE_IMAGE,) if RUNTIMES[name] == "cri-dockerd" else ()):
            assert "%s@%s" % (tag.rsplit(":", 1)[0], node.registry.digest(tag)) in digests, (name, tag, sorted(digests))


@pytest.fixture(scope="module")
def configured(fleet):
    """kubenode.gc.configure everywhere but node-c's kubelet (it keeps its drift); then stop node-d's containerd."""
    proc = fleet.playbook("configure", "--limit", "all:!node-c")
    assert proc.returncode == 0, proc.stdout[-3000:]
    proc = fleet.playbook("configure", "--limit", "node-c", "-e", "kubenode_gc_configure_kubelet=false")
    assert proc.returncode == 0, proc.stdout[-3000:]
    fleet.nodes["node-d"].systemctl("stop")
    return fleet


class _Before(dict):
    """{node: (image ids, usage percent)} before the audit; .nodes: the harness nodes."""


@pytest.fixture(scope="module")
def before(configured):
    state = _Before((name, (image_ids(node), usage(node))) for name, node in configured.nodes.items() if name != "node-d")
    state.nodes = configured.nodes
    return state


def test_configure_applied_the_policy(configured):
    for name in [n for n in ("node-a", "node-b", "node-c2") if n in configured.nodes]:
        config = yaml.safe_load(configured.nodes[name].exec("cat", "/var/lib/kubelet/config.yaml"))
        assert config["imageGCHighThresholdPercent"] == HIGH and config["imageGCLowThresholdPercent"] == LOW
        assert configured.nodes[name].exec("/usr/bin/python3", "-c", "import grpc, tomlkit, ruamel.yaml; print('ok')").strip() == "ok"
    drifted = yaml.safe_load(configured.nodes["node-c"].exec("cat", "/var/lib/kubelet/config.yaml"))
    assert drifted["imageGCHighThresholdPercent"] == 95


@pytest.fixture(scope="module")
def audit(configured, before):
    proc = configured.playbook("audit")
    # node-d could not be audited: the report is written, then the play fails (kubenode_gc_audit_fail_on: failed)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "The audit fails: 1 node could not be audited (node-d)" in proc.stdout
    assert proc.stdout.count("fatal: [node-d]") == 1, proc.stdout   # its first failure ends its audit: one error line
    report_dir = os.path.join(configured.workdir, "report")
    with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    return report_dir, report, proc


def test_audit_report_json(audit, before):
    report_dir, report, proc = audit
    assert report["schema_version"] == 2
    nodes = {n["host"]: n for n in report["nodes"]}
    assert sorted(nodes) == sorted(NODES)
    for name in [n for n in ("node-a", "node-b", "node-c", "node-c2") if n in nodes]:
        node = nodes[name]
        ids, percent = before[name]
        runtime, harness = RUNTIMES[name], before.nodes[name]
        assert node["status"] == "ok", node
        assert node["runtime"]["name"] == RUNTIME_NAME.get(runtime, "containerd")
        assert node["runtime"]["version"].lstrip("v").startswith(harness.version.lstrip("v").rsplit(".", 1)[0] + ".")
        assert node["runtime"]["sandbox_image"] == harness.sandbox_image
        assert node["imagefs"]["mountpoint"] == harness.imagefs_mountpoint
        assert node["imagefs"]["usage_percent"] == percent
        if runtime == "crio":  # split image filesystem: the containers' own, apart
            assert [fs["mountpoint"] for fs in node["container_filesystems"]] == [harness.containerfs_mountpoint]
        else:
            assert node["container_filesystems"] == []
        assert all(re.match(IMAGE_ID.get(runtime, r"^sha256:%s$" % HEX64), i) for i in ids)
        # containerd 1.7+ and cri-o pin the sandbox image themselves; 1.6 does not (image_gc protects it anyway)
        (pause,) = [img for img in harness.client.list_images() if harness.sandbox_image in img.repo_tags]
        assert pause.pinned == (runtime != "containerd-1.6")
        assert node["images"]["total"] == len(ids)
        assert node["images"]["in_use"] == 2  # app (running) and job (exited); the pause image is counted apart
        assert node["over_high_threshold"] == (percent >= (95 if name == "node-c" else HIGH))
        # prune: every unused image but the pause image (and, on the Docker node, the image its container outside Kubernetes uses)
        outside = 1 if runtime == "cri-dockerd" else 0
        assert node["images"]["reclaimable_prune"]["count"] == len(ids) - 3 - outside
    assert nodes["node-b"]["images"]["reclaimable_policy"]["count"] == 0
    assert nodes["node-a"]["images"]["reclaimable_policy"]["count"] > 0
    thresholds = nodes["node-a"]["thresholds"]
    assert (thresholds["high_percent"], thresholds["low_percent"], thresholds["source"]) == (HIGH, LOW, "kubelet_config")
    assert nodes["node-a"]["drift"] == [] and nodes["node-b"]["drift"] == []
    drift = {(d["component"], d["key"]): d for d in nodes["node-c"]["drift"]}
    assert drift[("kubelet", "imageGCHighThresholdPercent")]["desired"] == HIGH
    assert drift[("kubelet", "imageGCHighThresholdPercent")]["actual"] == 95
    assert nodes["node-c"]["thresholds"]["high_percent"] == 95
    failed = nodes["node-d"]
    assert failed["status"] == "failed" and "containerd.sock" in failed["error"]  # containerd 1.7 stopped
    assert report["summary"]["nodes_failed"] == 1 and report["summary"]["nodes_with_drift"] == 1
    assert "report.html" in proc.stdout
    if "node-c2" in nodes:
        # the Docker node's disk use in its own categories, its container outside Kubernetes among them
        storage = nodes["node-c2"]["storage"]
        assert set(storage["categories"]) == {"k8s_images", "writable_layers", "non_k8s_containers", "container_logs", "volumes",
                                              "build_cache", "unaccounted"}
        assert storage["categories"]["k8s_images"] > 0 and [o["name"] for o in storage["objects"]["non_k8s_containers"]] == ["ci-runner"]
        assert "non_k8s_containers" in {f["code"] for f in nodes["node-c2"]["findings"]}


class _Html(html.parser.HTMLParser):
    VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col"}

    def __init__(self):
        super().__init__()
        self.stack = []
        self.hosts = set()
        self.external = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("data-host"):
            self.hosts.add(attrs["data-host"])
        for key in ("src", "href"):
            if attrs.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(attrs[key])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, "unbalanced </%s> in %s" % (tag, self.stack[-3:])
        self.stack.pop()


def test_audit_report_html_and_markdown(audit):
    report_dir = audit[0]
    parser = _Html()
    with open(os.path.join(report_dir, "report.html"), encoding="utf-8") as f:
        parser.feed(f.read())
    assert parser.stack == [] and parser.external == []
    assert parser.hosts >= set(NODES)
    with open(os.path.join(report_dir, "report.md"), encoding="utf-8") as f:
        md = f.read()
    for name in NODES:
        assert len([line for line in md.splitlines() if line.startswith("| %s " % name)]) == 1


def test_audit_changed_nothing(audit, configured, before):
    for name, (ids, percent) in before.items():
        assert image_ids(configured.nodes[name]) == ids
    assert configured.nodes["node-c"].exec("cat", "/var/lib/kubelet/config.yaml") == DRIFTED_KUBELET
    assert configured.nodes["node-a"].exec("ls", "/var/lib/kubenode-gc/history", check=False) == ""


def test_audit_fail_on_drift(audit, configured):
    proc = configured.playbook("audit", "-e", "kubenode_gc_audit_fail_on=drift", "-e", "kubenode_gc_report_dir=" + os.path.join(configured.workdir, "gate"))
    assert proc.returncode != 0
    assert "node-c" in proc.stdout


def test_audit_unreachable_node_and_metrics(audit, configured, before):
    """A host that cannot be reached is in the report with its error; the optional metrics file is written."""
    extra = os.path.join(configured.workdir, "gone.yml")
    with open(extra, "w", encoding="utf-8") as f:
        yaml.safe_dump({"all": {"hosts": {"node-gone": {"ansible_host": "kgc-fleet-gone", "ansible_connection": "community.docker.docker"}}}}, f)
    report_dir = os.path.join(configured.workdir, "with-gone")
    proc = configured.playbook("audit", "-i", extra, "-e", "kubenode_gc_report_dir=" + report_dir, "-e", "kubenode_gc_audit_metrics_dir=/var/lib/node_exporter",
                               "-e", "kubenode_gc_audit_fail_on=never")
    assert proc.returncode == 0, proc.stdout[-3000:]   # never: failed nodes (node-d, node-gone) do not fail the play
    with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
        nodes = {n["host"]: n for n in json.load(f)["nodes"]}
    assert sorted(nodes) == sorted(list(NODES) + ["node-gone"])
    assert nodes["node-gone"]["status"] == "failed" and nodes["node-gone"]["error"]  # the connection's own message
    metrics = configured.nodes["node-a"].exec("cat", "/var/lib/node_exporter/kubenode_gc.prom")
    assert 'kubenode_gc_imagefs_usage_percent{mountpoint="%s"} %d' % (configured.nodes["node-a"].imagefs_mountpoint, before["node-a"][1]) in metrics
    assert 'kubenode_gc_reclaimable_bytes{policy="prune"} %d' % nodes["node-a"]["images"]["reclaimable_prune"]["bytes"] in metrics
    assert 'kubenode_gc_findings{severity="warning"} ' in metrics
    assert "kubenode_gc_drift_keys 3" in configured.nodes["node-c"].exec("cat", "/var/lib/node_exporter/kubenode_gc.prom")
    assert configured.nodes["node-d"].exec("ls", "/var/lib/node_exporter", check=False) == ""  # no runtime, no metrics


@pytest.fixture(scope="module")
def cleanup(audit, configured):
    proc = configured.playbook("cleanup", env={"ANSIBLE_CALLBACKS_ENABLED": "kubenode.gc.gc_summary"})
    # node-d's runtime is stopped: the summary is printed, then the play fails naming it
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "The cleanup did not succeed on every node: 1 node failed (node-d)" in proc.stdout
    return proc


def test_cleanup_freed_over_threshold_nodes_to_low(cleanup, configured, before):
    for name in [n for n in ("node-a", "node-c2") if n in configured.nodes]:
        node = configured.nodes[name]
        ids_before, percent_before = before[name]
        left = image_ids(node)
        history = node.exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json", check=False)
        assert usage(node) <= LOW < percent_before, (name, history[-3000:], cleanup.stdout[-3000:])
        assert left < ids_before
        tags = {t for img in node.client.list_images() for t in img.repo_tags}
        assert {"registry.example/app:1", "registry.example/job:1", node.sandbox_image} <= tags
        if RUNTIMES[name] == "cri-dockerd":  # the image of the container outside Kubernetes stays, and the container runs
            assert OUTSIDE_IMAGE in tags
            # the whole state in the message: if it ever stopped, how (exit code, OOM kill, error, when) and dockerd's word on it
            state = json.loads(node.exec("docker", "inspect", "-f", "{{json .State}}", "ci-runner"))
            assert state["Running"] is True, (state, node.exec("sh", "-c", "journalctl -u docker --no-pager | tail -40", check=False))
        history = node.exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json")
        record = json.loads(history)
        assert record["status"] == "cleaned" and len(record["images"]) == len(ids_before - left)
        assert {img["id"] for img in record["images"]} == ids_before - left  # the runtime's own ids (bare hex on cri-o)
        assert {img["reason"] for img in record["images"]} == {"space"}
        assert record["bytes_freed_measured"] > 0 and record["target_reached"] is True


def test_cleanup_left_the_others_alone(cleanup, configured, before):
    ids, percent = before["node-b"]
    assert image_ids(configured.nodes["node-b"]) == ids
    # reached, so it has a history record: skipped, and why
    record = json.loads(configured.nodes["node-b"].exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json"))
    assert record["status"] == "skipped" and "below the high threshold" in record["reason"]
    assert "node-b: skipped" in cleanup.stdout


def test_cleanup_follows_each_nodes_own_kubelet_policy(cleanup, configured, before):
    """Issue 22: node-c's kubelet says 95/90; at 84 % the audit calls it below its threshold, and the cleanup (no
    threshold variables) skips it by that same policy, naming where the threshold came from; node-a's record says
    its thresholds came from its kubelet configuration (written by configure)."""
    ids, percent = before["node-c"]
    assert percent < 95 and image_ids(configured.nodes["node-c"]) == ids
    out = " ".join(cleanup.stdout.split())
    assert "node-c: skipped" in out
    assert "below the high threshold 95% (node's kubelet config /var/lib/kubelet/config.yaml)" in out
    record = json.loads(configured.nodes["node-a"].exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json"))
    assert record["policy"]["sources"]["high_threshold_percent"] == {"kind": "node", "from": "node's kubelet config /var/lib/kubelet/config.yaml"}
    assert "node-a: removed %d image(s), the largest: " % len(record["images"]) in out
    assert "node-a: history record: %s" % record["history_file"] in out


def test_cleanup_reports_the_stopped_node_and_went_on(cleanup, configured):
    out = cleanup.stdout
    assert "node-d: failed" in out
    assert "PLAY RECAP" in out
    # reached (its runtime was down): a history record saying why
    record = json.loads(configured.nodes["node-d"].exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json"))
    assert record["status"] == "failed" and "containerd.sock" in record["error"]
    # the callback printed its table too
    assert out.count("HOST") >= 2
    node = configured.nodes["node-d"]
    node.systemctl("start")
    node.wait_for_cri()
    assert len(image_ids(node)) == node.filler_images + 3


def test_check_mode_cleanup_changes_nothing(cleanup, configured):
    state = {name: image_ids(node) for name, node in configured.nodes.items()}
    history = {name: node.exec("sh", "-c", "ls /var/lib/kubenode-gc/history 2>/dev/null || true") for name, node in configured.nodes.items()}
    proc = configured.playbook("cleanup", "--check", "-e", "kubenode_gc_cleanup_image_mode=prune", "-e", "kubenode_gc_cleanup_image_min_age=0s")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "check mode: planned" in proc.stdout or "planned" in proc.stdout
    for name, node in configured.nodes.items():
        assert image_ids(node) == state[name]
        assert node.exec("sh", "-c", "ls /var/lib/kubenode-gc/history 2>/dev/null || true") == history[name]
