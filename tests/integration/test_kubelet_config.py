# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.kubelet_config through ansible-playbook, on files in a temporary directory.

The main cases run under both interpreters, so both Debian's python3-ruamel.yaml 0.17 and ruamel.yaml 0.19
from PyPI edit the files. Every failure must leave every file byte for byte (and mtime) as it was.
"""

import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import time

import pytest

from tests.integration.conftest import Ansible, read_only_tmpfs

MODULE = "kubenode.gc.kubelet_config"

CONFIG = """\
# kubelet configuration of this node (kubeadm)
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
evictionHard:
  memory.available: "100Mi"  # memory first
  # disk signals
  nodefs.available: 10%
  imagefs.available: 15%
imageGCHighThresholdPercent: 85  # image GC starts here
imageMinimumGCAge: 2m0s
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
"""

SETTINGS = {
    "imageGCHighThresholdPercent": 75,
    "imageGCLowThresholdPercent": "60",
    "imageMaximumGCAge": "168h",
    "evictionHard": {"memory.available": "200Mi", "nodefs.available": "10%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
    "containerLogMaxFiles": 3,
}

EXPECTED = """\
# kubelet configuration of this node (kubeadm)
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
containerLogMaxFiles: 3
evictionHard:
  memory.available: "200Mi"  # memory first
  # disk signals
  nodefs.available: 10%
  imagefs.available: 15%
  imagefs.inodesFree: 5%
imageGCHighThresholdPercent: 75  # image GC starts here
imageGCLowThresholdPercent: 60
imageMaximumGCAge: 168h
imageMinimumGCAge: 2m0s
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
"""


@pytest.fixture
def node(tmp_path):
    """A directory for the node's files (the ansible fixture writes its own files next to it)."""
    path = tmp_path / "node"
    path.mkdir()
    (path / "kubelet.service.d").mkdir()
    return path


def run(ansible, node, interpreter=sys.executable, check=False, diff=False, **args):
    args.setdefault("flag_files", [str(node / "kubeadm-flags.env"), str(node / "default-kubelet"), str(node / "kubelet.service.d" / "*.conf")])
    return ansible.module(MODULE, args, interpreter=interpreter, check=check, diff=diff)


def snapshot(directory):
    """Every file under ``directory`` with its bytes and mtime."""
    files = {}
    for path in glob.glob(os.path.join(str(directory), "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                files[path] = (f.read(), os.stat(path).st_mtime_ns)
    return files


def one_sentence(msg):
    return msg.endswith(".") and ". " not in msg and "\n" not in msg


def test_enforce_settings_keeps_comments_owner_and_mode(ansible, node, interpreter):
    config = node / "config.yaml"
    config.write_text(CONFIG)
    os.chown(config, 1234, 2345)
    os.chmod(config, 0o600)
    res = run(ansible, node, interpreter, path=str(config), settings=SETTINGS, backup=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["created"] is False and res["format"] == "yaml" and res["path"] == str(config)
    assert config.read_text() == EXPECTED
    st = os.stat(config)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 2345, 0o600)
    assert os.path.dirname(res["backup_file"]) == str(node) and open(res["backup_file"]).read() == CONFIG
    assert res["config"]["imageGCLowThresholdPercent"] == 60 and res["config"]["clusterDNS"] == ["10.96.0.10"]
    assert res["effective"]["imageMaximumGCAge"] == "168h0m0s" and res["effective"]["evictionHard"]["memory.available"] == "200Mi"
    assert [f["code"] for f in res["findings"]] == ["partial_eviction_hard"]  # nodefs.inodesFree is not listed
    assert "diff" not in res

    before = snapshot(node)
    again = run(ansible, node, interpreter, path=str(config), settings=dict(SETTINGS, imageMinimumGCAge="2m", imageGCLowThresholdPercent=60),
                backup=True)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and "backup_file" not in again
    assert snapshot(node) == before


def test_check_mode_with_diff_changes_nothing(ansible, node, interpreter):
    config = node / "config.yaml"
    config.write_text(CONFIG)
    before = snapshot(node)
    res = run(ansible, node, interpreter, check=True, diff=True, path=str(config), settings=SETTINGS)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True
    assert res["diff"]["before"] == CONFIG and res["diff"]["after"] == EXPECTED
    assert res["diff"]["before_header"] == res["diff"]["after_header"] == str(config)
    assert res["config"]["imageGCHighThresholdPercent"] == 75  # what it would be
    assert snapshot(node) == before


def test_json_stays_json_with_its_indent(ansible, node, interpreter):
    config = node / "kubelet-config.json"
    text = ('{\n    "kind": "KubeletConfiguration",\n    "apiVersion": "kubelet.config.k8s.io/v1beta1",\n'
            '    "evictionHard": {\n        "memory.available": "100Mi",\n        "nodefs.available": "10%"\n    },\n'
            '    "imageGCHighThresholdPercent": 85\n}\n')
    config.write_text(text)
    res = run(ansible, node, interpreter, path=str(config), settings={
        "imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 70, "evictionHard": {"memory.available": "1Gi", "nodefs.available": "10%"},
        "mergeDefaultEvictionSettings": True})
    assert not res.get("failed"), res.get("msg")
    assert res["format"] == "json" and res["changed"] is True
    assert config.read_text() == (
        '{\n    "kind": "KubeletConfiguration",\n    "apiVersion": "kubelet.config.k8s.io/v1beta1",\n'
        '    "evictionHard": {\n        "memory.available": "1Gi",\n        "nodefs.available": "10%"\n    },\n'
        '    "imageGCHighThresholdPercent": 80,\n    "imageGCLowThresholdPercent": 70,\n    "mergeDefaultEvictionSettings": true\n}\n')
    assert res["effective"]["evictionHard"]["imagefs.inodesFree"] == "5%"  # merged defaults
    assert json.loads(config.read_text()) == res["config"]


def test_read_only_reports_effective_flags_and_findings(ansible, node, interpreter):
    config = node / "config.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      "imageGCHighThresholdPercent: 90\nimageMinimumGCAge: 0s\nevictionHard:\n  memory.available: 1Gi\n")
    (node / "kubeadm-flags.env").write_text('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock '
                                            '--image-gc-high-threshold=80"\n')
    (node / "default-kubelet").write_text("KUBELET_EXTRA_ARGS=--maximum-dead-containers=50 --node-ip=10.0.0.2\n")
    (node / "kubelet.service.d" / "20-gc.conf").write_text(
        "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_KUBEADM_ARGS \\\n  --image-gc-low-threshold 70 \\\n  --v=2\n")
    before = snapshot(node)
    res = run(ansible, node, interpreter, path=str(config))
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and snapshot(node) == before
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["imageMinimumGCAge"]) == (80, 70, "2m0s")
    assert eff["evictionHard"] == {"memory.available": "1Gi"}
    assert res["flag_overrides"] == [
        {"flag": "--image-gc-high-threshold", "value": "80", "file": str(node / "kubeadm-flags.env"), "key": "imageGCHighThresholdPercent",
         "deprecated": False},
        {"flag": "--maximum-dead-containers", "value": "50", "file": str(node / "default-kubelet"), "key": None, "deprecated": True},
        {"flag": "--image-gc-low-threshold", "value": "70", "file": str(node / "kubelet.service.d" / "20-gc.conf"),
         "key": "imageGCLowThresholdPercent", "deprecated": False},
    ]
    assert [(f["severity"], f["code"]) for f in res["findings"]] == [
        ("warning", "deprecated_flag"), ("warning", "flag_overrides_file"), ("warning", "flag_overrides_file"), ("warning", "partial_eviction_hard")]


def test_path_is_found_from_the_config_flag(ansible, node):
    config = node / "custom.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    (node / "kubelet.service.d" / "10-kubeadm.conf").write_text('[Service]\nEnvironment="KUBELET_CONFIG_ARGS=--config=%s"\n' % config)
    res = run(ansible, node)
    assert not res.get("failed"), res.get("msg")
    assert res["path"] == str(config) and res["changed"] is False


def test_content_creates_a_new_file_with_mode(ansible, node, interpreter):
    config = node / "config.yaml"
    content = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n# thresholds follow\n"
    settings = {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 70}
    res = run(ansible, node, interpreter, path=str(config), content=content, settings=settings, mode="0640")
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["created"] is True
    assert config.read_text() == content + "imageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\n"
    assert os.stat(config).st_mode & 0o7777 == 0o640
    again = run(ansible, node, interpreter, path=str(config), content=content, settings=settings, mode="0640")
    assert again["changed"] is False and again["created"] is False


@pytest.fixture
def readonly_dir(node):
    """A small tmpfs with a config file, remounted read-only."""
    with read_only_tmpfs(node / "ro", {"config.yaml": CONFIG}) as mount:
        yield mount


BAD_YAML = "kind: KubeletConfiguration\nevictionHard:\n  memory.available: 1Gi\n   nodefs.available: 5%\n"


@pytest.mark.parametrize(
    "name, text, args, message",
    [
        ("config.yaml", BAD_YAML, {"settings": {"imageGCHighThresholdPercent": 80}},
         "Cannot parse {path} as YAML: line 4, column 20: mapping values are not allowed here."),
        ("config.json", '{\n  "kind": "KubeletConfiguration",\n  "imageGCHighThresholdPercent": 85,\n}\n', {"settings": {"imageGCHighThresholdPercent": 80}},
         "Cannot parse {path} as JSON: line 4, column 1: Expecting property name enclosed in double quotes."),
        ("config.yaml", CONFIG, {"settings": {"imageGCHighThresholdPercent": 101}},
         "Not writing {path} because the kubelet would reject the result: invalid configuration: imageGCHighThresholdPercent "
         "(--image-gc-high-threshold) 101 must be between 0 and 100, inclusive."),
        ("config.yaml", CONFIG, {"settings": {"imageGCLowThresholdPercent": 85}},
         "Not writing {path} because the kubelet would reject the result: invalid configuration: imageGCLowThresholdPercent "
         "(--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85."),
        ("config.yaml", CONFIG, {"settings": {"imageMaximumGCAge": "1 week", "evictionPressureTransitionPeriod": "5"}},
         'Not writing {path} because the kubelet would reject the result: imageMaximumGCAge: time: unknown unit " week" in duration "1 week"; '
         'evictionPressureTransitionPeriod: time: missing unit in duration "5".'),
        ("config.yaml", CONFIG, {"settings": {"imageGCThreshold": 80}},
         "Unsupported key in settings: imageGCThreshold; the supported keys are containerLogMaxFiles, containerLogMaxSize, containerLogMaxWorkers, "
         "containerLogMonitorInterval, evictionHard, evictionMaxPodGracePeriod, evictionMinimumReclaim, evictionPressureTransitionPeriod, "
         "evictionSoft, evictionSoftGracePeriod, imageGCHighThresholdPercent, imageGCLowThresholdPercent, imageMaximumGCAge, imageMinimumGCAge, "
         "mergeDefaultEvictionSettings, podLogsDir."),
        ("config.yaml", CONFIG, {"settings": {"evictionHard": {"disk.available": "10%"}}},
         "Not writing {path} because the kubelet would reject the result: unsupported eviction signal disk.available."),
        ("config.yaml", CONFIG, {"settings": {"imageGCHighThresholdPercent": 90}, "validate": "/bin/false %s"},
         "The validate command '/bin/false %s' rejected the new {path} (rc 1)."),
        ("missing.yaml", None, {"settings": {"imageGCHighThresholdPercent": 80}},
         "The kubelet configuration file {path} does not exist; give content to create it."),
        # issue 11, item 8: Go's time.ParseDuration limit (the kubelet would not start)
        ("config.yaml", CONFIG, {"settings": {"imageMinimumGCAge": "2562048h"}},
         'Not writing {path} because the kubelet would reject the result: imageMinimumGCAge: time: invalid duration "2562048h".'),
        # issue 11, item 7: not a KubeletConfiguration, in read-only mode as well
        ("config.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  imageGCHighThresholdPercent: '85'\n", {"settings": {"imageGCHighThresholdPercent": 80}},
         "{path} is not a KubeletConfiguration (kind 'ConfigMap', apiVersion 'v1'; expected kind KubeletConfiguration, "
         "apiVersion kubelet.config.k8s.io/v1beta1); not touching it."),
        ("config.yaml", CONFIG.replace("kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1"), {"settings": {"imageGCHighThresholdPercent": 80}},
         "{path} is not a KubeletConfiguration (kind 'KubeletConfiguration', apiVersion 'kubelet.config.k8s.io/v1'; expected kind "
         "KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1); not touching it."),
        ("config.yaml", CONFIG.replace("apiVersion: kubelet.config.k8s.io/v1beta1\n", ""), {},
         "{path} is not a KubeletConfiguration (kind 'KubeletConfiguration', apiVersion missing; expected kind "
         "KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1); not touching it."),
    ],
)
def test_bad_input_fails_in_one_sentence_and_changes_nothing(ansible, node, name, text, args, message):
    path = node / name
    if text is not None:
        path.write_text(text)
    before = snapshot(node)
    res = run(ansible, node, path=str(path), **args)
    assert res.get("failed") is True
    assert res["msg"] == message.format(path=path)
    assert one_sentence(res["msg"])
    assert snapshot(node) == before


def test_read_only_filesystem_fails_and_changes_nothing(ansible, node, readonly_dir):
    config = readonly_dir / "config.yaml"
    before = snapshot(node)
    res = run(ansible, node, path=str(config), settings=SETTINGS, backup=True)
    assert res.get("failed") is True
    assert res["msg"] == "Cannot write %s: Read-only file system." % config
    assert snapshot(node) == before


def test_no_config_file_found(ansible, node):
    res = run(ansible, node, settings={"imageGCHighThresholdPercent": 80})
    if res.get("failed") is not True:
        pytest.skip("this machine has a kubelet configuration file at a default path")
    assert res["msg"].startswith("No kubelet configuration file found (tried /var/lib/kubelet/config.yaml, ")
    assert one_sentence(res["msg"])


def test_missing_ruamel_fails_with_hint(ansible, node, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    config = node / "config.yaml"
    config.write_text(CONFIG)
    res = run(ansible, node, interpreter=str(bare / "bin" / "python"), path=str(config))
    assert res["failed"] is True and "Failed to import the required Python library (ruamel.yaml)" in res["msg"]


def test_ansible_doc_renders(collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, MODULE], env=env, capture_output=True, text=True, check=True)
    assert "flag_overrides" in out.stdout and "gc_high_at_or_above_eviction" in out.stdout


# -- issue 11, item 4: secrets never in results; item 5: symlinked config files --------------------------------------

TOKEN = "eyJhbGciOiJSUzI1NiJ9.kubelet-static-pods.c2lnbmF0dXJl"
SECRET_CONFIG = CONFIG + """\
staticPodURL: https://pods.example.com/node-1
staticPodURLHeader:
  Authorization:
  - "Bearer %s"
  X-Cluster: [prod-eu-1]
""" % TOKEN


@pytest.mark.parametrize("check, diff", [(False, False), (False, True), (True, False), (True, True)])
def test_static_pod_url_header_token_is_in_no_result(ansible, node, interpreter, check, diff):
    config = node / "config.yaml"
    config.write_text(SECRET_CONFIG)
    read = run(ansible, node, interpreter, check=check, diff=diff, path=str(config))
    res = run(ansible, node, interpreter, check=check, diff=diff, path=str(config), settings=SETTINGS)
    for result in (read, res):
        assert not result.get("failed"), result.get("msg")
        assert TOKEN not in json.dumps(result)
        assert result["config"]["staticPodURLHeader"] == {"Authorization": ["VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"],
                                                          "X-Cluster": ["VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"]}
        assert result["config"]["staticPodURL"] == "https://pods.example.com/node-1"
    assert res["changed"] is True and res["config"]["imageGCHighThresholdPercent"] == 75
    if diff:
        assert "imageGCHighThresholdPercent: 85" in res["diff"]["before"] and "imageGCHighThresholdPercent: 75" in res["diff"]["after"]
        assert '- "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in res["diff"]["after"] and res["diff"]["after_header"] == str(config)
    else:
        assert "diff" not in res
    assert config.read_text() == (SECRET_CONFIG if check else EXPECTED + SECRET_CONFIG[len(CONFIG):])  # the token itself stays


def test_validate_output_quoting_the_token_is_scrubbed(ansible, node):
    config = node / "config.yaml"
    config.write_text(SECRET_CONFIG)
    before = snapshot(node)
    res = run(ansible, node, path=str(config), settings=SETTINGS, validate="sh -c 'grep Bearer %s >&2; exit 1'")
    assert res["failed"] is True and TOKEN not in json.dumps(res)
    assert res["msg"].endswith('(rc 1): - "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER".')  # the value is "Bearer <token>"
    assert snapshot(node) == before


def test_symlinked_config_is_edited_at_its_target(ansible, node, interpreter):
    real = node / "kubelet"
    real.mkdir()
    target = real / "config.yaml"
    target.write_text(CONFIG)
    os.chown(target, 1234, 2345)
    os.chmod(target, 0o600)
    (node / "config-current.yaml").symlink_to(target)
    link = node / "config.yaml"
    link.symlink_to("config-current.yaml")  # a chain of two links, the first relative
    res = run(ansible, node, interpreter, path=str(link), settings=SETTINGS, backup=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["path"] == str(link) and res["resolved_path"] == str(target)
    assert os.path.islink(link) and os.readlink(link) == "config-current.yaml" and os.readlink(node / "config-current.yaml") == str(target)
    assert target.read_text() == EXPECTED
    st = os.stat(target)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 2345, 0o600)
    assert os.path.dirname(res["backup_file"]) == str(real) and open(res["backup_file"]).read() == CONFIG
    assert sorted(os.listdir(node)) == ["config-current.yaml", "config.yaml", "kubelet", "kubelet.service.d"]
    again = run(ansible, node, interpreter, path=str(link), settings=SETTINGS)
    assert again["changed"] is False and again["resolved_path"] == str(target)


def test_dangling_symlink_fails_and_changes_nothing(ansible, node):
    link = node / "config.yaml"
    link.symlink_to(node / "missing" / "config.yaml")
    before = snapshot(node)
    res = run(ansible, node, path=str(link), content=CONFIG, settings=SETTINGS)
    assert res["failed"] is True and one_sentence(res["msg"])
    assert res["msg"] == "%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (
        link, node / "missing" / "config.yaml")
    assert snapshot(node) == before and os.path.islink(link) and not os.path.exists(node / "missing")


# -- issue 21 items 2, 3, 4, 7 and issue 23's byte guard: what an edit keeps, what is never read --------------------------

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "kubespray")
KUBESPRAY_SETTINGS = {"imageGCHighThresholdPercent": 90, "imageGCLowThresholdPercent": 70, "evictionHard": {"memory.available": "200Mi"}}


def kubespray_config():
    with open(os.path.join(FIXTURES, "kubelet-config.yaml.rendered"), "rb") as f:
        return f.read()


def test_kubespray_config_keeps_every_other_byte(ansible, node, interpreter):
    raw = kubespray_config()
    config = node / "kubelet-config.yaml"
    config.write_bytes(raw)
    res = run(ansible, node, interpreter, path=str(config), settings=KUBESPRAY_SETTINGS)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True
    expected = (raw.replace(b"imageGCHighThresholdPercent: 85", b"imageGCHighThresholdPercent: 90")
                .replace(b"imageGCLowThresholdPercent: 80", b"imageGCLowThresholdPercent: 70") + b"evictionHard:\n  memory.available: 200Mi\n")
    assert config.read_bytes() == expected  # "True", "False" and "containerRuntimeEndpoint :" as kubespray writes them
    before = snapshot(node)
    again = run(ansible, node, interpreter, path=str(config), settings=KUBESPRAY_SETTINGS)
    assert again["changed"] is False and snapshot(node) == before


def test_crlf_and_bom_are_kept(ansible, node, interpreter):
    raw = b"\xef\xbb\xbf" + CONFIG.replace("\n", "\r\n").encode()
    config = node / "config.yaml"
    config.write_bytes(raw)
    res = run(ansible, node, interpreter, path=str(config), settings={"imageGCHighThresholdPercent": 90, "containerLogMaxFiles": 3})
    assert not res.get("failed"), res.get("msg")
    assert config.read_bytes() == raw.replace(b"Percent: 85  #", b"Percent: 90  #").replace(
        b"- 10.96.0.10\r\n", b"- 10.96.0.10\r\ncontainerLogMaxFiles: 3\r\n")
    again = run(ansible, node, interpreter, path=str(config), settings={"imageGCHighThresholdPercent": 90, "containerLogMaxFiles": 3})
    assert again["changed"] is False


def test_an_aliased_key_is_refused_and_nothing_changes(ansible, node):
    config = node / "config.yaml"
    config.write_text(CONFIG.replace("evictionHard:\n", "evictionHard: &ev\n") + "evictionSoft: *ev\n")
    before = snapshot(node)
    res = run(ansible, node, path=str(config), settings={"evictionHard": {"memory.available": "300Mi"}})
    assert res["failed"] is True and one_sentence(res["msg"]), res.get("msg")
    assert res["msg"].startswith("Not changing evictionHard in %s: its value is shared with evictionSoft through a YAML anchor and alias (&ev)" % config)
    assert snapshot(node) == before


def test_concurrent_runs_on_one_file_both_land(ansible, node, collections_path, tmp_path):
    config = node / "config.yaml"
    runners = [Ansible(collections_path, tmp_path / ("runner-%d" % n)) for n in range(2)]
    for runner in runners:
        os.makedirs(runner.workdir)
    for trial in range(4):
        config.write_text(CONFIG)
        wanted = [{"imageGCHighThresholdPercent": 90 - trial}, {"containerLogMaxFiles": 3 + trial}]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda pair: run(pair[0], node, path=str(config), settings=pair[1]), zip(runners, wanted)))
        assert [r.get("failed", False) for r in results] == [False, False], [r.get("msg") for r in results]
        assert [r["changed"] for r in results] == [True, True]
        text = config.read_text()
        assert "imageGCHighThresholdPercent: %d  # image GC starts here" % (90 - trial) in text and "containerLogMaxFiles: %d\n" % (3 + trial) in text


def _timed(ansible, node, **args):
    start = time.monotonic()
    res = run(ansible, node, **args)
    return res, time.monotonic() - start


def test_fifo_char_device_and_big_file_fail_at_once(ansible, node):
    fifo = node / "fifo.yaml"
    os.mkfifo(fifo)
    zero = node / "zero.yaml"
    zero.symlink_to("/dev/zero")
    big = node / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    for path, what in ((fifo, "a FIFO"), (zero, "a character device")):
        res, took = _timed(ansible, node, path=str(path), settings={"imageGCHighThresholdPercent": 90})
        assert res["failed"] is True and one_sentence(res["msg"]) and took < 60
        assert res["msg"] == "%s is %s, not a regular file; config files must be regular files (or symbolic links to one)." % (path, what)
    res, took = _timed(ansible, node, path=str(big))
    assert res["failed"] is True and one_sentence(res["msg"]) and took < 60
    assert res["msg"].startswith("%s is 52428800 bytes, more than the 4194304 bytes a config file may have" % big)


def test_url_credentials_are_in_no_result(ansible, node, interpreter):
    config = node / "config.yaml"
    config.write_text(CONFIG + "staticPodURL: https://fetcher:st4tic-pass@pods.example.net/node-1\n")
    res = run(ansible, node, interpreter, diff=True, path=str(config), settings={"imageGCHighThresholdPercent": 90})
    assert not res.get("failed"), res.get("msg")
    assert "st4tic-pass" not in json.dumps(res) and "fetcher:" not in json.dumps(res)
    assert res["config"]["staticPodURL"] == "https://VALUE_SPECIFIED_IN_NO_LOG_PARAMETER@pods.example.net/node-1"
    assert "st4tic-pass" in config.read_text()
