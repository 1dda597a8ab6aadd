# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to the config roles: one clear sentence, and every file byte-for-byte as it was.

The roles run through ansible-playbook against localhost with their files in a temp dir
(Molecule covers the good paths on real node containers)."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.integration.conftest import BIN

KUBELET = "# kubeadm\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 85\n"
CONTAINERD = '# node config\nversion = 2\nroot = "/var/lib/containerd"\n'
STORAGE = '# storage\n[storage]\ndriver = "overlay"\ngraphroot = "/var/lib/containers/storage"\n'


def run_role(collections_path, tmp_path, role, variables):
    play = [{"name": "Bad input", "hosts": "localhost", "gather_facts": False, "roles": [{"role": "kubenode.gc." + role, "vars": variables}]}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", PATH=BIN + os.pathsep + os.environ["PATH"])
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=/usr/bin/python3", str(playbook)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)


def snapshot(directory):
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            st = os.stat(path)
            with open(path, "rb") as f:
                out[path] = (f.read(), st.st_mtime_ns, st.st_mode)
    return out


def failure(proc):
    """The failing task's message, from the default callback's output."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("fatal:")]
    assert proc.returncode != 0 and lines, proc.stdout[-2000:]
    return lines[-1]


def kubelet_case(tmp_path, **variables):
    (tmp_path / "config.yaml").write_text(KUBELET)
    base = {"kubelet_gc_config_path": str(tmp_path / "config.yaml"), "kubelet_gc_restart": False}
    base.update(variables)
    return base


CASES = {
    "kubelet missing file in merge mode": (
        "kubelet_gc", lambda p: {"kubelet_gc_config_path": str(p / "absent.yaml"), "kubelet_gc_restart": False},
        "does not exist; give content to create it"),
    "kubelet low >= high": (
        "kubelet_gc", lambda p: kubelet_case(p, kubelet_gc_image_gc_high_threshold_percent=70, kubelet_gc_image_gc_low_threshold_percent=70),
        "imageGCLowThresholdPercent (--image-gc-low-threshold) 70 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 70"),
    "kubelet threshold out of range": (
        "kubelet_gc", lambda p: kubelet_case(p, kubelet_gc_image_gc_high_threshold_percent=101),
        "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"),
    "kubelet bad duration": (
        "kubelet_gc", lambda p: kubelet_case(p, kubelet_gc_image_maximum_gc_age="1 week"),
        "imageMaximumGCAge"),
    "kubelet unknown manage mode": (
        "kubelet_gc", lambda p: kubelet_case(p, kubelet_gc_manage="replace"),
        "kubelet_gc_manage"),
    "containerd missing file in merge mode": (
        "containerd_storage", lambda p: {"containerd_storage_config_path": str(p / "absent.toml"), "containerd_storage_root": "/srv/c",
                                         "containerd_storage_restart": False, "containerd_storage_validate": False},
        "absent.toml"),
    "containerd malformed TOML": (
        "containerd_storage", lambda p: (p / "config.toml").write_text(CONTAINERD + "[plugins\n") and {
            "containerd_storage_config_path": str(p / "config.toml"), "containerd_storage_root": "/srv/c",
            "containerd_storage_restart": False, "containerd_storage_validate": False},
        "line 4"),
    "containerd relative root": (
        "containerd_storage", lambda p: (p / "config.toml").write_text(CONTAINERD) and {
            "containerd_storage_config_path": str(p / "config.toml"), "containerd_storage_root": "var/lib/c",
            "containerd_storage_restart": False, "containerd_storage_validate": False},
        "absolute"),
    "containerd pins on a version 2 config": (
        "containerd_storage", lambda p: (p / "config.toml").write_text(CONTAINERD) and {
            "containerd_storage_config_path": str(p / "config.toml"), "containerd_storage_pinned_images": ["registry.example/app:1"],
            "containerd_storage_restart": False, "containerd_storage_validate": False},
        "settings.pinned_images needs a version 3 config (containerd 2.x); "),
    "crio bad pinned image": (
        "crio_storage", lambda p: (p / "storage.conf").write_text(STORAGE) and {
            "crio_storage_storage_conf_path": str(p / "storage.conf"), "crio_storage_config_path": str(p / "crio.conf"),
            "crio_storage_dropin_dir": str(p / "crio.conf.d"), "crio_storage_pinned_images": ["registry.example/app:1", "bad name"],
            "crio_storage_restart": False},
        "crio_storage_pinned_images must be a list of image names such as docker.io/library/busybox:1.36"),
    "crio bad driver": (
        "crio_storage", lambda p: (p / "storage.conf").write_text(STORAGE) and {
            "crio_storage_storage_conf_path": str(p / "storage.conf"), "crio_storage_config_path": str(p / "crio.conf"),
            "crio_storage_dropin_dir": str(p / "crio.conf.d"), "crio_storage_driver": "overlay3", "crio_storage_restart": False},
        "overlay3"),
    "gc_timer interpreter below a world-writable directory": (
        "gc_timer", lambda p: (shutil.copy(os.path.realpath(sys.executable), p / "python3") and {"gc_timer_python": str(p / "python3")}),
        "goes through /tmp, which is writable by its group and others (mode 1777): root runs it in the timer's service, "
        "so it and every directory above it must be owned by root and writable by root alone."),
    "gc_timer ledger where the service's sandbox hides it": (
        "gc_timer", lambda p: {"gc_timer_ledger_path": str(p / "ledger.json")},
        "/ledger.json is in /tmp, which the timer's service cannot write (its sandbox hides /home, /root, /run/user, /tmp, /var/tmp)."),
}
# what the gc_timer role writes outside the test's directory: none of it may appear after a refusal
TIMER_FILES = ["/etc/systemd/system/kubenode-gc.service", "/etc/systemd/system/kubenode-gc.timer", "/etc/kubenode-gc", "/usr/local/lib/kubenode-gc"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_changes_nothing(collections_path, tmp_path, case):
    role, make_vars, expected = CASES[case]
    workdir = tmp_path / "files"
    workdir.mkdir()
    variables = make_vars(workdir)
    before = snapshot(str(workdir))
    timer_before = [os.path.lexists(p) for p in TIMER_FILES]
    proc = run_role(collections_path, tmp_path, role, variables)
    message = failure(proc)
    assert expected in message, message
    assert snapshot(str(workdir)) == before
    assert [os.path.lexists(p) for p in TIMER_FILES] == timer_before
