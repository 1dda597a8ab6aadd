# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 22 through ansible-playbook on every real runtime: one policy (a cleanup with no threshold variables cleans a
node by its own kubelet configuration, and says so), variables checked first (bad input changes nothing at all: not
one container, image, file or record), told truthfully (check mode's plan holds every image the real run removes; the
summary names what went and where the record is; min_age holding everything back warns), and kubelet_gc with no
variables leaving the node's values alone."""

import glob
import json
import os
import subprocess

import pytest
import yaml

from devtools.images import ImageSpec
from tests.integration.conftest import BIN

pytestmark = pytest.mark.runtimes("one")

MIB = 1 << 20


def usage(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return 100 - (st.f_bavail * 100) // st.f_blocks


def playbook(ansible, runtime, tmp_path, name, *args, **extra):
    (tmp_path / "containers").mkdir(exist_ok=True)
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": os.path.join(BIN, "python"),
        "kubenode_gc_cri_endpoint": runtime.endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_container_logs_dir": str(tmp_path / "containers"),
        "kubenode_gc_ledger_path": str(tmp_path / "ledger.json"),
        "kubenode_gc_cleanup_history_dir": str(tmp_path / "history"),
        "kubenode_gc_report_dir": str(tmp_path / "report"),
        "kubenode_gc_container_min_age": "0s",
    }
    node.update(extra)
    node = {k: v for k, v in node.items() if v is not None}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gc-node": node}}}))
    cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc." + name, "-i", str(inventory)] + list(args)
    return subprocess.run(cmd, cwd=str(tmp_path), env=ansible.env(), capture_output=True, text=True, check=False)


def records(tmp_path):
    out = []
    for path in sorted(glob.glob(str(tmp_path / "history" / "*.json"))):
        with open(path, encoding="utf-8") as f:
            out.append((path, json.load(f)))
    return out


def state(runtime):
    """Everything a cleanup could change in the runtime: its images and containers."""
    return ({i.id for i in runtime.client.list_images()}, {c.id for c in runtime.client.list_containers()})


def kubelet_config(tmp_path, high, low):
    path = tmp_path / "kubelet-config.yaml"
    text = "# the node's own\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" \
           "imageGCHighThresholdPercent: %d\nimageGCLowThresholdPercent: %d\n" % (high, low)
    path.write_text(text)
    return path, text


def fill(runtime, count=6):
    runtime.pull_images([ImageSpec("fill-%d:1" % n, size=3 * MIB, share_base=False) for n in range(count)])
    pod = runtime.run_pod("dead")
    runtime.add_container(pod, "gone", "fill-0:1", "exited")


def test_a_cleanup_without_variables_cleans_by_the_nodes_kubelet_config(ansible, runtime, tmp_path):
    """The node's kubelet config says 'over its high threshold' (like 70/60 at 73%; the kubelet's 85 would skip it): a
    cleanup with no threshold variables cleans it by its own thresholds; --check's plan holds every image the real run
    removes; the summary says where the thresholds came from, names the images removed and the history record."""
    fill(runtime)
    now = usage(runtime)
    assert now < 85
    high, low = now - 2, now - 12
    path, _text = kubelet_config(tmp_path, high, low)
    variables = dict(kubelet_gc_config_path=str(path), kubenode_gc_cleanup_image_min_age="0s")

    planned = playbook(ansible, runtime, tmp_path, "cleanup", "--check", **variables)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "gc-node: would remove " in planned.stdout
    assert "Check mode: the images listed are the kubelet's size-based plan" in planned.stdout
    plan_names = {line.split("would remove ")[1] for line in planned.stdout.splitlines() if "gc-node: would remove " in line}
    assert records(tmp_path) == []  # check mode writes no record

    before = {i.id: i.repo_tags for i in runtime.client.list_images()}
    proc = playbook(ansible, runtime, tmp_path, "cleanup", **variables)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ((record_path, record),) = records(tmp_path)
    gone = set(before) - {i.id for i in runtime.client.list_images()}
    assert gone and record["status"] == "cleaned" and {i["id"] for i in record["images"]} == gone
    assert usage(runtime) <= low
    sources = record["policy"]["sources"]
    assert sources["high_threshold_percent"] == {"kind": "node", "from": "node's kubelet config %s" % path}
    assert sources["low_threshold_percent"]["kind"] == "node" and sources["min_age"]["kind"] == "variable"
    assert (record["policy"]["high_threshold_percent"], record["policy"]["low_threshold_percent"]) == (high, low)
    out = proc.stdout
    assert "high_threshold_percent %d%%, low_threshold_percent %d%% from node's kubelet config %s" % (high, low, path) in out
    assert "min_age 0s from variable kubenode_gc_cleanup_image_min_age" in out
    assert "gc-node: removed %d image(s), the largest: " % len(gone) in out
    for image_id in gone:
        assert before[image_id][0] in out  # named, not only counted
    assert "gc-node: history record: %s" % record_path in out
    # every image the real run removed was in check mode's plan (the plan names at most five: check by name then)
    removed_names = {before[i][0] for i in gone}
    assert all(name in " ".join(plan_names) for name in removed_names), (plan_names, removed_names)
    assert record["history_file"] == record_path


def test_the_kubelet_default_applies_where_the_node_has_no_config_and_says_so(ansible, runtime, tmp_path):
    fill(runtime)
    before = state(runtime)
    proc = playbook(ansible, runtime, tmp_path, "cleanup", kubelet_gc_config_path=str(tmp_path / "absent.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert state(runtime) == before
    assert "below the high threshold 85% (kubelet default)" in proc.stdout


def test_a_run_that_min_age_holds_back_warns_naming_it(ansible, runtime, tmp_path):
    """prune with the default min_age on a node image_gc never saw: nothing goes, and the run says why."""
    fill(runtime, 2)
    images = {i.id for i in runtime.client.list_images()}
    proc = playbook(ansible, runtime, tmp_path, "cleanup", kubenode_gc_cleanup_image_mode="prune", kubenode_gc_cleanup_containers=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {i.id for i in runtime.client.list_images()} == images
    text = " ".join((proc.stdout + proc.stderr).split())
    # fill-1 is the one candidate (an exited container uses fill-0)
    assert "Removed no image: all 1 candidate(s) are younger than min_age 2m0s, counted from when image_gc first saw them on this node " \
           "(first sighting 20" in text, text[-3000:]
    assert "by the ledger %s); the first becomes eligible at 20" % (tmp_path / "ledger.json") in text


BAD = {
    "low above high": (["-e", "kubenode_gc_cleanup_low_threshold_percent=70", "-e", "kubenode_gc_cleanup_high_threshold_percent=60"], {},
                       "kubenode_gc_cleanup_low_threshold_percent='70' must be below kubenode_gc_cleanup_high_threshold_percent='60'."),
    "high 150": ([], {"kubenode_gc_cleanup_high_threshold_percent": 150},
                 "kubenode_gc_cleanup_high_threshold_percent=150 is out of range: it must be a percent between 0 and 100."),
    "min age in words": (["-e", "kubenode_gc_cleanup_image_min_age='2 minutes'"], {},
                         "kubenode_gc_cleanup_image_min_age='2 minutes' is not a Go duration the kubelet accepts"),
    "misspelt keep list": ([], {"kubenode_gc_keep_image": ["registry.k8s.io/*"]},
                           "kubenode_gc_keep_image is not a kubenode.gc variable; did you mean kubenode_gc_keep_images?"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("name", ["cleanup", "audit", "configure"])
def test_bad_input_fails_first_with_one_sentence_and_changes_nothing(ansible, runtime, tmp_path, name, case):
    """Checked once, on the controller, before any node is touched: not one container, image, file or record changes."""
    args, extra, sentence = BAD[case]
    fill(runtime)
    before = state(runtime)
    path, text = kubelet_config(tmp_path, 70, 60)
    extra = dict(extra, kubelet_gc_config_path=str(path), kubelet_gc_restart=False, kubenode_gc_configure_prereqs=False,
                 kubenode_gc_configure_runtime="none", kubenode_gc_cleanup_image_mode="prune", kubenode_gc_cleanup_image_min_age=None)
    if case != "min age in words":
        extra["kubenode_gc_cleanup_image_min_age"] = "0s"
    proc = playbook(ansible, runtime, tmp_path, name, *args, **extra)
    assert proc.returncode != 0
    fatal = [line for line in proc.stdout.splitlines() if line.startswith("fatal:")]
    assert len(fatal) == 1 and sentence in fatal[0], proc.stdout[-3000:]
    assert "Check the kubenode.gc variables before any node is touched" in proc.stdout
    assert "Remove dead containers" not in proc.stdout and "Set the kubelet" not in proc.stdout and "Read the runtime" not in proc.stdout
    assert state(runtime) == before
    assert path.read_text() == text and sorted(os.listdir(tmp_path)) == ["containers", "inventory.yml", "kubelet-config.yaml"]


def test_configure_without_variables_leaves_the_nodes_kubelet_values_alone(ansible, runtime, tmp_path):
    """kubelet_gc merge mode: no variable set, no key rewritten (a node's 70/60 is not turned into 85/80), no warning."""
    path, text = kubelet_config(tmp_path, 70, 60)
    proc = playbook(ansible, runtime, tmp_path, "configure", kubelet_gc_config_path=str(path), kubelet_gc_restart=False,
                    kubenode_gc_configure_prereqs=False, kubenode_gc_configure_runtime="none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text() == text
    assert "changed=0" in proc.stdout and "[WARNING]" not in proc.stdout + proc.stderr
    assert "Show the consistency findings" not in proc.stdout or "skipping: [gc-node]" in proc.stdout
    # a variable the user sets is enforced, and only that one
    proc = playbook(ansible, runtime, tmp_path, "configure", kubelet_gc_config_path=str(path), kubelet_gc_restart=False, kubelet_gc_backup=False,
                    kubenode_gc_configure_prereqs=False, kubenode_gc_configure_runtime="none", kubelet_gc_image_gc_low_threshold_percent=50)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text() == text.replace("imageGCLowThresholdPercent: 60", "imageGCLowThresholdPercent: 50")


def test_configure_check_keeps_an_interpreter_that_already_imports_the_libraries(ansible, runtime, tmp_path):
    """Issue 32: configure --check with node_prereqs on a node whose inventory interpreter already imports the libraries:
    nothing is installed, the play keeps that interpreter (not the venv that is not there yet), says what it would install,
    and the kubelet_gc role's check runs with it."""
    path, text = kubelet_config(tmp_path, 70, 60)
    venv = tmp_path / "no-venv-yet"
    proc = playbook(ansible, runtime, tmp_path, "configure", "--check", kubelet_gc_config_path=str(path), kubelet_gc_restart=False,
                    kubenode_gc_configure_runtime="none", kubelet_gc_image_gc_low_threshold_percent=50,
                    node_prereqs_method="venv", node_prereqs_venv_path=str(venv))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Check mode: kubenode.gc.node_prereqs would install grpcio==" in out and "into the virtual environment %s" % venv in out
    assert "the play keeps %s, which already imports the libraries." % os.path.join(BIN, "python") in out
    assert "Failed to import" not in out and "failed=0" in out
    assert path.read_text() == text and not venv.exists()  # check mode: nothing written, nothing installed
