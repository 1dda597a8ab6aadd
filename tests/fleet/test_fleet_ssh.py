# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet playbooks over real SSH, as a real fleet is reached: no ``docker`` connection here.

Two node containers run sshd (the node image has openssh-server and sudo). The inventory logs in
as ``kgc``, a user that is not root, with a key made by this test, and every play runs with
``become: true`` (sudo). Both nodes are filled over the high threshold, with a pod whose running
and exited containers use images that must survive, and a token planted in their configuration
files (kubelet ``staticPodURLHeader``, containerd registry auth) that must never come out.

ssh-a  cri-o 1.37 (containerd 1.7 without cri-o binaries)
ssh-b  containerd 1.6

``configure`` runs once (it installs the Python libraries with apt over SSH and sudo). Then the
same sequence runs twice, with pipelining on and with it off, from the same runtime state (the
images the first cleanup removed are pulled again, byte for byte, and its ledger and history
are removed): ``audit``, ``cleanup
--check``, ``cleanup``. The results must be the same as what the runtime itself says (this
harness reads it over CRI, locally) and the same in both modes: the report's node figures, what
check mode changed (nothing) and planned (what the audit counted), what cleanup removed and what
is left.

The execution environment test (test_execution_environment_audit) reuses these nodes.
"""

import glob
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from devtools.fetch import crio_dir
from devtools.images import ImageSpec
from devtools.nodes import make_node, node_images, remove_leftover_nodes
from tests.fleet.test_fleet import HIGH, LOW, MIB, POLICY_VARS, Fleet, fill, image_ids, usage

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER = "kgc"
PERCENT = 86
RUNTIMES = {"ssh-a": "crio" if crio_dir() else "containerd-1.7", "ssh-b": "containerd-1.6"}
KUBELET_TOKEN = "kgc-planted-kubelet-token-7f3a9c0e"
REGISTRY_TOKEN = "kgc-planted-registry-password-5d1e2b"
KUBELET = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodURLHeader:
  Authorization:
  - Bearer %s
""" % KUBELET_TOKEN
REGISTRY_AUTH = """
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".auth]
  username = "robot"
  password = "%s"
""" % REGISTRY_TOKEN
SECRETS = (KUBELET_TOKEN, REGISTRY_TOKEN)
MODES = {"pipelining-on": True, "pipelining-off": False}
# report node keys that hold when the run happened, not what the node is
VOLATILE = ("metrics_file",)


class SshFleet(Fleet):
    """The Fleet of test_fleet, reached over SSH as a user with sudo."""

    def __init__(self, workdir, collections_path):
        super().__init__(workdir, collections_path)
        self.key = os.path.join(workdir, "id_ed25519")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kubenode-gc-test", "-f", self.key], check=True)
        with open(self.key + ".pub", encoding="utf-8") as f:
            self.public_key = f.read()

    def host_vars(self):
        return {name: {"ansible_host": node.address()} for name, node in self.nodes.items()}

    def group_vars(self, pipelining, key_file=None, report_dir=None):
        return {
            "ansible_connection": "ansible.builtin.ssh",
            "ansible_user": USER,
            "ansible_ssh_private_key_file": key_file or self.key,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            "ansible_ssh_pipelining": pipelining,
            "ansible_become": True,
            **POLICY_VARS,
            "kubenode_gc_report_dir": report_dir or os.path.join(self.workdir, "report"),
        }

    def write_inventory(self, pipelining=True):
        with open(self.inventory, "w", encoding="utf-8") as f:
            yaml.safe_dump({"all": {"children": {"nodes": {"hosts": self.host_vars(), "vars": self.group_vars(pipelining)}}}}, f)


def fillers(node):
    return [ImageSpec("registry.example/old/tool-%d:1" % i, size=3 * MIB, share_base=False) for i in range(1, node.filler_images + 1)]


@pytest.fixture(scope="module")
def ssh_fleet(tmp_path_factory, collections_path):
    images = node_images(sorted(set(RUNTIMES.values())))
    remove_leftover_nodes("fleet-ssh")
    fleet = SshFleet(str(tmp_path_factory.mktemp("fleet-ssh")), collections_path)
    try:
        for name, runtime in RUNTIMES.items():
            node = make_node("kgc-ssh-" + name, images[runtime], runtime=runtime, imagefs_size="192M", group="fleet-ssh")
            fleet.nodes[name] = node
            node.start()
            node.filler_images = fill(node, PERCENT)
            node.exec("mkdir", "-p", "/var/lib/kubelet")
            node.exec("sh", "-c", "printf '%s' \"$1\" > /var/lib/kubelet/config.yaml", "sh", KUBELET)
            if runtime.startswith("containerd"):
                node.exec("sh", "-c", "printf '%s' \"$1\" >> /etc/containerd/config.toml", "sh", REGISTRY_AUTH)
            node.add_ssh_user(USER, fleet.public_key)
        fleet.write_inventory()
        proc = fleet.playbook("configure")
        assert proc.returncode == 0, proc.stdout[-3000:]
        yield fleet
    finally:
        for node in fleet.nodes.values():
            node.stop()


def _state(fleet):
    return {name: (image_ids(node), usage(node)) for name, node in fleet.nodes.items()}


def _history(node):
    return node.exec("sh", "-c", "ls /var/lib/kubenode-gc/history 2>/dev/null || true").split()


@pytest.fixture(scope="module")
def modes(ssh_fleet):
    """Each mode from the same runtime state: {mode: dict of what the runtime and the playbooks said}."""
    results = {}
    start = None
    for mode, pipelining in MODES.items():
        fleet = ssh_fleet
        if start is not None:  # bring back what the previous mode's cleanup removed, and forget it ran (ledger, history)
            for name, node in fleet.nodes.items():
                node.pull_images(fillers(node))
                node.exec("rm", "-rf", "/var/lib/kubenode-gc")
                assert image_ids(node) == start[name][0]
        start = _state(fleet)
        fleet.write_inventory(pipelining)
        report_dir = os.path.join(fleet.workdir, "report-" + mode)
        audit = fleet.playbook("audit", "-e", "kubenode_gc_report_dir=" + report_dir)
        assert audit.returncode == 0, audit.stdout[-3000:]
        with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
            report = json.load(f)
        history = {name: _history(node) for name, node in fleet.nodes.items()}
        check = fleet.playbook("cleanup", "--check")
        assert check.returncode == 0, check.stdout[-3000:]
        after_check = _state(fleet)
        history_after_check = {name: _history(node) for name, node in fleet.nodes.items()}
        cleanup = fleet.playbook("cleanup", env={"ANSIBLE_CALLBACKS_ENABLED": "kubenode.gc.gc_summary"})
        assert cleanup.returncode == 0, cleanup.stdout[-4000:]
        records = {}
        for name, node in fleet.nodes.items():
            new = sorted(set(_history(node)) - set(history[name]))
            assert len(new) == 1, (name, new)
            records[name] = json.loads(node.exec("cat", "/var/lib/kubenode-gc/history/" + new[0]))
        results[mode] = {
            "start": start, "report": report, "report_dir": report_dir, "after_check": after_check,
            "history": history, "history_after_check": history_after_check, "records": records, "left": _state(fleet),
            "logs": [audit.stdout + audit.stderr, check.stdout + check.stderr, cleanup.stdout + cleanup.stderr],
        }
    return results


MOVING_SIGNALS = ("nodefs.available", "nodefs.inodesFree", "imagefs.available")


def _figures(node):
    """The node's figures but the byte counts the runtime's own bookkeeping moves by a few pages between runs."""
    figures = {k: v for k, v in node.items() if k not in VOLATILE + ("headroom",)}
    figures["imagefs"] = {k: v for k, v in node["imagefs"].items() if k not in ("available_bytes", "used_bytes")}
    figures["container_filesystems"] = [{k: v for k, v in fs.items() if k not in ("available_bytes", "used_bytes")} for fs in node["container_filesystems"]]
    # disk_usage's byte figures move with containerd's metadata too: only its categories are compared
    storage = figures.pop("storage", None) or {}
    figures["storage_categories"] = sorted(storage.get("categories") or {})
    # and so do the percentages the eviction findings quote (below): those findings by code
    figures["findings"] = [f["code"] if f.get("source") == "disk_usage" or f.get("code") in ("near_eviction", "eviction_threshold_reached") else f
                           for f in node.get("findings") or []]
    # nodefs is the host's disk, which the rest of the machine writes to between the two runs, and imagefs's free space
    # moves with containerd's metadata (_bytes allows 64 KiB, which can move a percentage rounded to 0.1 by one step):
    # those signals by state, imagefs's percentage in _percents
    figures["eviction_signals"] = [s if s["signal"] not in MOVING_SIGNALS else {k: v for k, v in s.items() if k != "free_percent"}
                                   for s in node.get("eviction_signals") or []]
    return figures


def _percents(node):
    """The free percentages of imagefs's byte signals, which the two runs may round one step apart."""
    return [s["free_percent"] for s in node.get("eviction_signals") or [] if s["signal"] == "imagefs.available" and s.get("free_percent") is not None]


def _bytes(node):
    # headroom to a byte target is null without one (kubenode_gc_free_bytes_high unset)
    # statvfs figures only: used_bytes is what containerd's periodic sampler last saw, which lags removals by its period
    return [node["imagefs"]["available_bytes"]] + [node["headroom"][k] or 0 for k in sorted(node["headroom"])]


def test_ssh_audit_says_what_the_runtime_says(modes, ssh_fleet):
    for mode, result in modes.items():
        nodes = {n["host"]: n for n in result["report"]["nodes"]}
        assert sorted(nodes) == sorted(RUNTIMES), mode
        for name, harness in ssh_fleet.nodes.items():
            node = nodes[name]
            ids, percent = result["start"][name]
            assert node["status"] == "ok" and node["parts_failed"] == {}, (mode, node)
            assert node["runtime"]["name"] == ("cri-o" if RUNTIMES[name] == "crio" else "containerd")
            assert node["runtime"]["sandbox_image"] == harness.sandbox_image
            assert node["imagefs"]["mountpoint"] == harness.imagefs_mountpoint
            assert node["imagefs"]["usage_percent"] == percent >= HIGH
            assert node["images"]["total"] == len(ids) and node["images"]["in_use"] == 2
            assert node["thresholds"]["source"] == "kubelet_config"
            assert (node["thresholds"]["high_percent"], node["thresholds"]["low_percent"]) == (HIGH, LOW)
            assert node["over_high_threshold"] is True and node["drift"] == []
            assert node["images"]["reclaimable_policy"]["count"] > 0


def test_ssh_check_mode_changed_nothing(modes, ssh_fleet):
    for mode, result in modes.items():
        assert result["after_check"] == result["start"], mode
        assert result["history_after_check"] == result["history"], mode


def test_ssh_cleanup_within_what_the_audit_planned(modes, ssh_fleet):
    for mode, result in modes.items():
        nodes = {n["host"]: n for n in result["report"]["nodes"]}
        for name, harness in ssh_fleet.nodes.items():
            ids_before = result["start"][name][0]
            left, percent = result["left"][name]
            removed = ids_before - left
            record = result["records"][name]
            assert record["status"] == "cleaned" and {img["id"] for img in record["images"]} == removed, (mode, name)
            # check mode plans what the audit counts (estimated sizes); the real pass stops once the measured
            # usage is at the low threshold, so it removes at most that many
            planned = int(re.search(r'"%s +\d+ +\d+ +\d+ +(\d+) ' % name, result["logs"][1]).group(1))
            assert planned == nodes[name]["images"]["reclaimable_policy"]["count"], (mode, name)
            assert 0 < len(removed) <= planned, (mode, name)
            assert percent <= LOW
            tags = {t for img in harness.client.list_images() if img.id in left for t in img.repo_tags}
            assert {"registry.example/app:1", "registry.example/job:1", harness.sandbox_image} <= tags


def test_ssh_same_results_with_and_without_pipelining(modes):
    on, off = modes["pipelining-on"], modes["pipelining-off"]
    assert on["start"] == off["start"]
    assert [_figures(n) for n in on["report"]["nodes"]] == [_figures(n) for n in off["report"]["nodes"]]
    for node_on, node_off in zip(on["report"]["nodes"], off["report"]["nodes"]):  # within 64 KiB (containerd's metadata)
        assert all(abs(a - b) <= 64 << 10 for a, b in zip(_bytes(node_on), _bytes(node_off))), (node_on, node_off)
        assert all(abs(a - b) <= 0.1 + 1e-9 for a, b in zip(_percents(node_on), _percents(node_off))), (node_on, node_off)
    assert {k: v for k, v in on["report"]["summary"].items() if "bytes" not in k} == {k: v for k, v in off["report"]["summary"].items() if "bytes" not in k}
    assert on["left"] == off["left"]
    for name in RUNTIMES:
        assert [img["id"] for img in on["records"][name]["images"]] == [img["id"] for img in off["records"][name]["images"]]


def test_ssh_logged_in_as_the_user_and_became_root(modes, ssh_fleet):
    for name, node in ssh_fleet.nodes.items():
        # without pipelining the modules were copied into the login user's own temporary directory ...
        assert node.exec("stat", "-c", "%U", "/home/%s/.ansible" % USER).strip() == USER
        # ... and ran as root through sudo (kgc cannot create /var/lib/kubenode-gc)
        assert node.exec("stat", "-c", "%U", "/var/lib/kubenode-gc/history").strip() == "root"
        # the modules kept their compiled code (and containerd's committed snapshots' sizes) in root's cache directory,
        # which the login user can neither list nor read
        assert node.exec("stat", "-c", "%U %a", "/var/cache/kubenode-gc").strip() == "root 700"
        kept = node.exec("sh", "-c", "cd /var/cache/kubenode-gc && stat -c '%U %a %n' *").splitlines()
        assert all(line.startswith("root 600 ") for line in kept), kept
        names = {line.split(" ", 2)[2] for line in kept}
        assert any(n.startswith("bytecode.ansible_") and "node_audit" in n for n in names), names
        assert any(n.startswith("usage.") for n in names) == (RUNTIMES[name] != "crio"), names
        denied = node.exec("sh", "-c", "su -s /bin/sh %s -c 'ls /var/cache/kubenode-gc' 2>&1 || echo denied" % USER)
        assert "denied" in denied, denied


def test_ssh_no_planted_secret_comes_out(modes, ssh_fleet):
    texts = [log for result in modes.values() for log in result["logs"]]
    for path in glob.glob(os.path.join(ssh_fleet.workdir, "**", "*"), recursive=True):
        if os.path.isfile(path) and not path.startswith(ssh_fleet.key):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    # the tokens are there to be found: on the nodes, where they were planted
    assert KUBELET_TOKEN in ssh_fleet.nodes["ssh-b"].exec("cat", "/var/lib/kubelet/config.yaml")
    assert REGISTRY_TOKEN in ssh_fleet.nodes["ssh-b"].exec("cat", "/etc/containerd/config.toml")
    for secret in SECRETS:
        assert not [t for t in texts if secret in t]


def ee_image():
    """The execution environment image: $KUBENODE_GC_EE_IMAGE, else built now by tests/ee/build.sh (ansible-builder build)."""
    if os.environ.get("KUBENODE_GC_EE_IMAGE"):
        return os.environ["KUBENODE_GC_EE_IMAGE"]
    proc = subprocess.run(["bash", os.path.join(REPO, "tests", "ee", "build.sh")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.split()[-1]


def test_execution_environment_audit(modes, ssh_fleet):
    """The audit inside the execution environment, run by ansible-runner as AWX runs a job template.

    A private data directory as AWX writes one (inventory, the machine credential's key in env/ssh_key,
    a project playbook), mounted at /runner in a container of the EE image on the nodes' Docker network;
    the runner's artifacts must hold the report and no planted secret."""
    image = ee_image()
    private = os.path.join(ssh_fleet.workdir, "runner")
    for sub in ("inventory", "env", "project"):
        os.makedirs(os.path.join(private, sub), exist_ok=True)
    group_vars = ssh_fleet.group_vars(True, report_dir="/runner/artifacts/kubenode-gc-report")
    del group_vars["ansible_ssh_private_key_file"]  # the runner adds env/ssh_key to its ssh-agent
    with open(os.path.join(private, "inventory", "hosts.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"all": {"children": {"nodes": {"hosts": ssh_fleet.host_vars(), "vars": group_vars}}}}, f)
    shutil.copyfile(ssh_fleet.key, os.path.join(private, "env", "ssh_key"))
    with open(os.path.join(private, "env", "envvars"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_NOCOLOR": "1"}, f)
    with open(os.path.join(private, "project", "audit.yml"), "w", encoding="utf-8") as f:
        f.write("---\n- name: Audit the fleet\n  ansible.builtin.import_playbook: kubenode.gc.audit\n")
    subprocess.run(["chmod", "-R", "a+rwX", private], check=True)  # the EE runs as uid 1000
    name = "kgc-ee-runner"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    proc = subprocess.run(["docker", "run", "--rm", "--name", name, "-v", "%s:/runner" % private, image,
                           "ansible-runner", "run", "/runner", "-p", "audit.yml", "--ident", "audit"],
                          capture_output=True, text=True, check=False)
    artifacts = os.path.join(private, "artifacts", "audit")
    with open(os.path.join(ssh_fleet.workdir, "ee-runner.log"), "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    with open(os.path.join(artifacts, "status"), encoding="utf-8") as f:
        assert f.read().strip() == "successful"
    with open(os.path.join(artifacts, "rc"), encoding="utf-8") as f:
        assert f.read().strip() == "0"
    assert os.listdir(os.path.join(artifacts, "job_events"))
    with open(os.path.join(private, "artifacts", "kubenode-gc-report", "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    nodes = {n["host"]: n for n in report["nodes"]}
    assert sorted(nodes) == sorted(RUNTIMES)
    for host, harness in ssh_fleet.nodes.items():
        assert nodes[host]["status"] == "ok" and nodes[host]["parts_failed"] == {}, nodes[host]
        assert nodes[host]["images"]["total"] == len(image_ids(harness))
        assert nodes[host]["imagefs"]["usage_percent"] == usage(harness)
    assert os.path.exists(os.path.join(private, "artifacts", "kubenode-gc-report", "report.html"))
    leaks = []
    for root, _dirs, files in os.walk(private):
        for file in files:
            path = os.path.join(root, file)
            # not the key itself, nor ssh's control sockets (artifacts of the run, not files)
            if path == os.path.join(private, "env", "ssh_key") or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            leaks += [(path, secret) for secret in SECRETS if secret in text]
    assert not leaks
