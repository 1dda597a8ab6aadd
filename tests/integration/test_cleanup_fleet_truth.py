# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.cleanup on three hosts against a real runtime (issue 21, item 8): one cleaned, one whose Python lacks
grpcio, one unreachable. The summary is printed, then the play fails; every reached node has a history record."""

import glob
import json
import os
import signal
import subprocess

import pytest
import yaml

from devtools.faults import CrashAfter
from devtools.images import ImageSpec
from tests.integration.conftest import BIN

pytestmark = pytest.mark.runtimes("one")

MIB = 1 << 20


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A Python on the 'node' without grpcio (and without protobuf): Debian's python3 in a venv of its own."""
    venv = tmp_path_factory.mktemp("bare-python")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import grpc"], capture_output=True, check=False).returncode != 0
    return python


def fleet(ansible, runtime, tmp_path, bare_python, *args):
    common = {
        "kubenode_gc_cri_endpoint": runtime.endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_container_logs_dir": str(tmp_path / "containers"),
        "kubenode_gc_ledger_path": str(tmp_path / "ledger.json"),
        "kubenode_gc_container_min_age": "0s",
        "kubenode_gc_cleanup_image_min_age": "0s",
        "kubenode_gc_cleanup_image_mode": "prune",
    }
    hosts = {
        "node-ok": dict(common, ansible_connection="local", ansible_python_interpreter=os.path.join(BIN, "python"),
                        kubenode_gc_cleanup_history_dir=str(tmp_path / "history-ok")),
        "node-nogrpc": dict(common, ansible_connection="local", ansible_python_interpreter=bare_python,
                            kubenode_gc_cleanup_history_dir=str(tmp_path / "history-nogrpc")),
        "node-gone": dict(common, ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1, ansible_ssh_common_args="-o ConnectTimeout=3",
                          kubenode_gc_cleanup_history_dir=str(tmp_path / "history-gone")),
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}, sort_keys=False))  # waves in this order
    cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc.cleanup", "-i", str(inventory)] + list(args)
    return subprocess.run(cmd, cwd=str(tmp_path), env=ansible.env(), capture_output=True, text=True, check=False)


def records(tmp_path, name):
    out = []
    for path in sorted(glob.glob(str(tmp_path / ("history-" + name) / "*.json"))):
        assert os.stat(path).st_mode & 0o777 == 0o600
        with open(path, encoding="utf-8") as f:
            out.append(json.load(f))
    return out


def test_the_cleanup_fails_after_its_summary_and_every_reached_node_has_a_history_record(ansible, runtime, tmp_path, bare_python):
    runtime.pull_images([ImageSpec("truth-%d:1" % n, size=MIB, share_base=False) for n in range(2)])
    proc = fleet(ansible, runtime, tmp_path, bare_python, "-e", "kubenode_gc_cleanup_serial=3")
    out = proc.stdout
    # the play fails (exit code 2), after the summary table, naming the failed and the unreachable node
    assert proc.returncode == 2, out[-6000:] + proc.stderr
    assert out.index("kubenode.gc cleanup") < out.index("The cleanup did not succeed on every node: 1 node failed (node-nogrpc); "
                                                        "1 node could not be reached (node-gone).")
    assert "node-nogrpc" in out[out.index("kubenode.gc cleanup"):] and "node-gone" in out[out.index("kubenode.gc cleanup"):]
    assert not {t for i in runtime.client.list_images() for t in i.repo_tags} & {"docker.io/library/truth-0:1", "docker.io/library/truth-1:1"}
    (ok,) = records(tmp_path, "ok")
    assert ok["status"] == "cleaned" and {"docker.io/library/truth-0:1", "docker.io/library/truth-1:1"} <= {t for i in ok["images"] for t in i["repo_tags"]}
    (failed,) = records(tmp_path, "nogrpc")   # reached, failed before cleaning: it has a record, saying why
    assert failed["host"] == "node-nogrpc" and failed["status"] == "failed" and "grpc" in failed["error"].lower()
    assert failed["check_mode"] is False and failed["finished_at"].endswith("Z") and failed["unreachable"] is False
    assert records(tmp_path, "gone") == []    # never reached


def test_the_waves_stop_after_a_failed_wave_and_the_summary_still_prints(ansible, runtime, tmp_path, bare_python):
    """Waves of one node (25 % of 3): node-ok is cleaned, node-nogrpc fails its whole wave, so node-gone is left alone."""
    proc = fleet(ansible, runtime, tmp_path, bare_python)
    out = proc.stdout
    assert proc.returncode == 2, out[-6000:] + proc.stderr
    stop = "1 of the wave of 1 node failed (node-nogrpc), more than kubenode_gc_cleanup_max_fail_percentage 10%: no further wave ran"
    assert "The cleanup did not succeed on every node: 1 node failed (node-nogrpc); the waves stopped: %s." % stop in out, out
    assert "kubenode.gc cleanup" in out and "not cleaned: %s" % stop in out
    assert "UNREACHABLE" not in out     # node-gone was never contacted
    assert [r["status"] for r in records(tmp_path, "ok")] == ["cleaned"] and [r["status"] for r in records(tmp_path, "nogrpc")] == ["failed"]
    assert records(tmp_path, "gone") == []


class _CtrlC:
    """Stands in for the runtime in CrashAfter: its 'crash' is a Ctrl-C to the whole ansible-playbook process group."""

    def __init__(self, runtime):
        self.workdir, self.endpoint = runtime.workdir, runtime.endpoint
        self.engine_env = runtime.engine_env  # the proxy gives the module what finds the runtime's engine behind it
        self.pgid = None

    def crash(self):
        os.killpg(self.pgid, signal.SIGINT)


def test_an_interrupted_runs_removals_are_recorded_by_the_next_run(ansible, runtime, tmp_path):
    """Ctrl-C after 2 image removals: the provisional history record stays; the next run records the images that went."""
    runtime.pull_images([ImageSpec("ctrlc-%d:1" % n, size=MIB, share_base=False) for n in range(6)])
    before = {i.id for i in runtime.client.list_images()}
    history_dir = tmp_path / "history"
    node = {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(BIN, "python"),
            "kubenode_gc_pod_logs_dir": runtime.pod_logs, "kubenode_gc_container_logs_dir": str(tmp_path / "containers"),
            "kubenode_gc_ledger_path": str(tmp_path / "ledger.json"), "kubenode_gc_cleanup_history_dir": str(history_dir),
            "kubenode_gc_container_min_age": "0s", "kubenode_gc_cleanup_image_min_age": "0s", "kubenode_gc_cleanup_image_mode": "prune"}

    def run(endpoint, env=None, **popen):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gc-node": dict(node, kubenode_gc_cri_endpoint=endpoint)}}}))
        cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc.cleanup", "-i", str(inventory)]
        return subprocess.Popen(cmd, cwd=str(tmp_path), env=ansible.env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)

    ctrl_c = _CtrlC(runtime)
    with CrashAfter(ctrl_c, 2, methods=("RemoveImage",)) as proxy:
        proc = run(proxy.endpoint, env=proxy.env, start_new_session=True)
        ctrl_c.pgid = proc.pid
        out = proc.communicate(timeout=600)[0]
    assert proc.returncode != 0 and proxy.crashed, out[-4000:]
    gone = before - {i.id for i in runtime.client.list_images()}
    assert len(gone) >= 2, out[-4000:]
    (left,) = [json.loads(p.read_text()) for p in history_dir.iterdir()]
    assert left["status"] == "interrupted" and left["in_progress"] is True and {i["id"] for i in left["images_before"]} == before

    proc = run(runtime.endpoint)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out[-4000:]
    records = sorted((json.loads(p.read_text()) for p in history_dir.iterdir()), key=lambda r: r["status"])
    assert [r["status"] for r in records] == ["cleaned", "interrupted"]
    interrupted = records[1]
    assert interrupted["in_progress"] is False and "images_before" not in interrupted and interrupted["reconstructed_at"].endswith("Z"), out
    assert {i["id"] for i in interrupted["images"]} == gone   # exactly what the interrupted run removed
    assert {i["reason"] for i in interrupted["images"]} == {"interrupted_run"}
    assert interrupted["note"].startswith("reconstructed by the next run")
    # the next run did not count them again
    assert not {i["id"] for i in records[0]["images"]} & gone
