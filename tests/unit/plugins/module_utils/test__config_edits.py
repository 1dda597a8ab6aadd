# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 21 items 2, 3, 4, 7 and issue 23's byte guard, on real bytes: what a config edit keeps, what it refuses to read."""

import functools
import json
import os
import shutil
import threading
import time

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._redact import MARKER
from ansible_collections.kubenode.gc.plugins.module_utils.config import _config_io as cio
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config as kcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as kpolicy
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config as rcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config._byte_guard import guard, splice
from ansible_collections.kubenode.gc.plugins.module_utils.config._toml_edit import keep_other_lines, line_paths, set_values
from ansible_collections.kubenode.gc.plugins.modules import kubelet_config, runtime_config

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "kubespray")
KUBESPRAY_KUBELET = open(os.path.join(FIXTURES, "kubelet-config.yaml.rendered"), encoding="utf-8").read()
KUBESPRAY_TOML = open(os.path.join(FIXTURES, "config.toml"), encoding="utf-8").read()

KUBELET = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: True
evictionHard:
  memory.available: 100Mi
imageGCHighThresholdPercent: 85
"""


class FakeModule:
    """What ConfigFiles needs of AnsibleModule."""

    def atomic_move(self, src, dest, unsafe_writes=False):
        os.replace(src, dest)

    def backup_local(self, path):
        shutil.copy2(path, path + ".bak")
        return path + ".bak"

    def run_command(self, cmd):
        return 0, "", ""


def kubelet_run(tmp_path, check=False, **params):
    params.setdefault("flag_files", [str(tmp_path / "none")])
    opts = kcfg.options(params_for(kubelet_config.ARGUMENT_SPEC, **params))
    return kcfg.run(cio.ConfigFiles(FakeModule()), opts, check_mode=check)


def runtime_run(check=False, **params):
    params.setdefault("query_runtime", False)
    opts = rcfg.options(params_for(runtime_config.ARGUMENT_SPEC, **params))
    return rcfg.run(cio.ConfigFiles(FakeModule()), opts, check_mode=check)


def changed_lines(before, after):
    """The (old, new) line pairs that differ, for files whose edits replace lines one for one."""
    return [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True)) if a != b]


# ------------------------------------------------------------------------ line endings, BOM


@pytest.mark.parametrize("bom", [False, True])
def test_kubelet_crlf_and_bom_are_kept(tmp_path, bom):
    path = tmp_path / "config.yaml"
    raw = (b"\xef\xbb\xbf" if bom else b"") + KUBELET.replace("\n", "\r\n").encode()
    path.write_bytes(raw)
    res = kubelet_run(tmp_path, path=str(path), settings={"imageGCHighThresholdPercent": 90})
    assert res["changed"] is True
    assert path.read_bytes() == raw.replace(b"Percent: 85", b"Percent: 90")
    again = kubelet_run(tmp_path, path=str(path), settings={"imageGCHighThresholdPercent": 90})
    assert again["changed"] is False


def test_runtime_crlf_toml_is_kept(tmp_path):
    path = tmp_path / "config.toml"
    raw = KUBESPRAY_TOML.replace("\n", "\r\n").encode()
    path.write_bytes(raw)
    res = runtime_run(runtime="containerd", path=str(path), settings={"root": "/data/containerd", "snapshotter": "native"})
    assert res["changed"] is True
    assert path.read_bytes() == raw.replace(b'root = "/var/lib/containerd"', b'root = "/data/containerd"').replace(
        b'snapshotter = "overlayfs"', b'snapshotter = "native"')
    assert runtime_run(runtime="containerd", path=str(path), settings={"root": "/data/containerd"})["changed"] is False


def test_mixed_line_endings_are_read_but_not_rewritten(tmp_path):
    path = tmp_path / "config.yaml"
    raw = KUBELET.replace("kind: KubeletConfiguration\n", "kind: KubeletConfiguration\r\n").encode()
    path.write_bytes(raw)
    assert kubelet_run(tmp_path, path=str(path))["config"]["imageGCHighThresholdPercent"] == 85
    with pytest.raises(ConfigError, match="^%s mixes CRLF and LF line endings; not rewriting it" % path):
        kubelet_run(tmp_path, path=str(path), settings={"imageGCHighThresholdPercent": 90})
    assert path.read_bytes() == raw


# ------------------------------------------------------------------------ aliases


ALIASED = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: &ev
  memory.available: 100Mi
  nodefs.available: 10%
evictionSoft: *ev
evictionSoftGracePeriod:
  memory.available: 1m
  nodefs.available: 1m
"""


@pytest.mark.parametrize("key,other", [("evictionHard", "evictionSoft"), ("evictionSoft", "evictionHard")])
def test_a_key_shared_through_an_alias_is_never_changed(tmp_path, key, other):
    path = tmp_path / "config.yaml"
    path.write_text(ALIASED)
    with pytest.raises(ConfigError) as exc:
        kubelet_run(tmp_path, path=str(path), settings={key: {"memory.available": "200Mi", "nodefs.available": "10%"}})
    assert str(exc.value) == (
        "Not changing %s in %s: its value is shared with %s through a YAML anchor and alias (&ev), so the edit would change it too; "
        "write the value out in full under each key, then run again." % (key, path, other))
    assert path.read_text() == ALIASED
    # the same value, or another key: no refusal, nothing else touched
    assert kubelet_run(tmp_path, path=str(path), settings={key: {"memory.available": "100Mi", "nodefs.available": "10%"}})["changed"] is False
    res = kubelet_run(tmp_path, path=str(path), settings={"imageGCHighThresholdPercent": 90})
    assert res["changed"] is True and path.read_text() == ALIASED + "imageGCHighThresholdPercent: 90\n"


# ------------------------------------------------------------------------ regular files of bounded size


def _returns_within(seconds, func, *args):
    """func(*args)'s exception (it must raise), checked to come within ``seconds``."""
    out = {}

    def call():
        try:
            func(*args)
        except Exception as exc:  # pylint: disable=broad-except
            out["exc"] = exc

    thread = threading.Thread(target=call, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "still reading after %s seconds" % seconds
    assert time.monotonic() - start < seconds
    return out.get("exc")


def test_fifo_char_device_directory_and_big_file_fail_at_once(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    exc = _returns_within(5, cio.read_text, str(fifo))
    assert str(exc) == "%s is a FIFO, not a regular file; config files must be regular files (or symbolic links to one)." % fifo
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    exc = _returns_within(5, cio.read_text, str(zero))
    assert str(exc) == "%s is a character device, not a regular file; config files must be regular files (or symbolic links to one)." % zero
    exc = _returns_within(5, cio.read_text, str(tmp_path))
    assert str(exc).startswith("%s is a directory, not a regular file;" % tmp_path)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    exc = _returns_within(5, cio.read_text, str(big))
    assert str(exc) == "%s is 52428800 bytes, more than the %d bytes a config file may have; not reading it." % (big, cio.MAX_CONFIG_BYTES)
    limit = tmp_path / "limit.yaml"
    limit.write_bytes(b"#" * (cio.MAX_CONFIG_BYTES - 1) + b"\n")
    assert len(cio.read_text(str(limit))) == cio.MAX_CONFIG_BYTES


def test_module_runs_fail_on_a_fifo_path_storage_path_and_drop_in(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    exc = _returns_within(10, functools.partial(kubelet_run, tmp_path, path=str(fifo), settings={"imageGCHighThresholdPercent": 90}))
    assert isinstance(exc, ConfigError) and str(exc).startswith("%s is a FIFO" % fifo)
    (tmp_path / "crio.conf").write_text("[crio]\n")
    exc = _returns_within(10, functools.partial(runtime_run, runtime="crio", path=str(tmp_path / "crio.conf"), storage_path=str(fifo),
                                                dropin_dir=str(tmp_path / "none")))
    assert isinstance(exc, ConfigError) and str(exc).startswith("%s is a FIFO" % fifo)
    dropins = tmp_path / "crio.conf.d"
    dropins.mkdir()
    os.mkfifo(dropins / "10-x.conf")
    (tmp_path / "storage.conf").write_text("[storage]\n")
    exc = _returns_within(10, functools.partial(runtime_run, runtime="crio", path=str(tmp_path / "crio.conf"),
                                                storage_path=str(tmp_path / "storage.conf"), dropin_dir=str(dropins)))
    assert isinstance(exc, ConfigError) and str(exc).startswith("%s is a FIFO" % (dropins / "10-x.conf"))


# ------------------------------------------------------------------------ lock and compare-and-swap


def test_a_run_waits_for_the_lock_of_another(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBELET)
    with cio.lock_dirs([str(path)]):
        with pytest.raises(ConfigError, match="^Another run has held the lock on %s for more than 0 seconds; nothing was written.$" % tmp_path):
            with cio.lock_dirs([str(path)], timeout=0):
                pass
    with cio.lock_dirs([str(path)], timeout=0):  # released
        pass


def test_a_file_changed_after_it_was_read_is_not_overwritten(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBELET)
    files = cio.ConfigFiles(FakeModule())
    files.read_text(str(path))
    path.write_text(KUBELET + "# someone else\n")
    with pytest.raises(ConfigError, match="^%s was changed by another writer while this run planned its edit; nothing was written, run again.$" % path):
        files.write_text(str(path), KUBELET.replace("85", "90"))
    assert path.read_text() == KUBELET + "# someone else\n" and os.listdir(tmp_path) == ["config.yaml"]


def test_concurrent_runs_on_one_file_both_land(tmp_path):
    path = tmp_path / "config.yaml"
    for trial in range(5):
        path.write_text(KUBELET)
        keys = [{"imageGCHighThresholdPercent": 90}, {"containerLogMaxFiles": 7}, {"imageMinimumGCAge": "5m"}, {"containerLogMaxSize": "20Mi"}]
        errors = []

        def one(settings):
            try:
                kubelet_run(tmp_path, path=str(path), settings=settings)
            except Exception as exc:  # pylint: disable=broad-except
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(k,)) for k in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, (trial, errors)
        text = path.read_text()
        wanted = ("imageGCHighThresholdPercent: 90", "containerLogMaxFiles: 7", "imageMinimumGCAge: 5m", "containerLogMaxSize: 20Mi")
        assert all(line in text for line in wanted)


# ------------------------------------------------------------------------ URL credentials


def test_url_credentials_are_in_no_result_or_diff(tmp_path):
    path = tmp_path / "config.toml"
    text = KUBESPRAY_TOML.replace("https://mirror.example.net", "https://puller:mirr0r-pass@mirror.example.net")
    path.write_text(text)
    res = runtime_run(runtime="containerd", path=str(path), settings={"root": "/data/containerd"})
    dumped = json.dumps(res)
    assert "mirr0r-pass" not in dumped and "s3cr3t-pull-pass" not in dumped
    assert 'endpoint = ["https://%s@mirror.example.net"]' % MARKER in res["diff"][0]["before"]
    assert 'root = "/data/containerd"' in res["diff"][0]["after"]
    assert path.read_text() == text.replace('root = "/var/lib/containerd"', 'root = "/data/containerd"')
    kpath = tmp_path / "config.yaml"
    kpath.write_text(KUBELET + "staticPodURL: https://fetcher:st4tic-pass@pods.example.net/manifests\n")
    res = kubelet_run(tmp_path, path=str(kpath), settings={"imageGCHighThresholdPercent": 90})
    assert "st4tic-pass" not in json.dumps(res)
    assert res["config"]["staticPodURL"] == "https://%s@pods.example.net/manifests" % MARKER
    assert "staticPodURL: https://%s@pods.example.net/manifests" % MARKER in res["diff"]["after"]


# ------------------------------------------------------------------------ every other byte kept


def test_kubespray_kubelet_config_keeps_booleans_and_key_spacing():
    settings = {"imageGCHighThresholdPercent": 90, "imageGCLowThresholdPercent": 70, "evictionHard": {"memory.available": "200Mi"},
                "containerLogMaxFiles": None}
    res = kpolicy.plan("/etc/kubernetes/kubelet-config.yaml", KUBESPRAY_KUBELET, settings=settings)
    after = res["after"]
    assert "failSwapOn: True\n" in after and "containerRuntimeEndpoint : unix://" in after and "seccompDefault: False\n" in after
    expected = (KUBESPRAY_KUBELET.replace("imageGCHighThresholdPercent: 85", "imageGCHighThresholdPercent: 90")
                .replace("imageGCLowThresholdPercent: 80", "imageGCLowThresholdPercent: 70").replace("containerLogMaxFiles: 5\n", "")
                + "evictionHard:\n  memory.available: 200Mi\n")
    assert after == expected
    again = kpolicy.plan("/etc/kubernetes/kubelet-config.yaml", after, settings=settings)
    assert again["changed"] is False


@pytest.mark.parametrize("settings,lines", [
    ({"root": "/data/containerd"}, [('root = "/var/lib/containerd"\n', 'root = "/data/containerd"\n')]),
    ({"snapshotter": "native", "sandbox_image": "registry.k8s.io/pause:3.9"}, [
        ('    sandbox_image = "registry.k8s.io/pause:3.10"\n', '    sandbox_image = "registry.k8s.io/pause:3.9"\n'),
        ('      snapshotter = "overlayfs"\n', '      snapshotter = "native"\n')]),
])
def test_kubespray_config_toml_changes_only_the_edited_lines(tmp_path, settings, lines):
    path = tmp_path / "config.toml"
    path.write_text(KUBESPRAY_TOML)
    res = runtime_run(runtime="containerd", path=str(path), settings=settings)
    assert res["changed"] is True
    after = path.read_text()
    assert changed_lines(KUBESPRAY_TOML, after) == lines and len(after) - len(KUBESPRAY_TOML) == sum(len(b) - len(a) for a, b in lines)
    assert runtime_run(runtime="containerd", path=str(path), settings=settings)["changed"] is False


def test_a_line_the_renderer_reindents_is_taken_back_from_the_original():
    original = KUBESPRAY_TOML
    edits = [(("plugins", "io.containerd.grpc.v1.cri", "containerd"), "snapshotter", "native")]
    rendered = set_values(original, "c.toml", edits)
    # what tomlkit does to kubespray v2.26's file on some versions: the registry-auth table line re-indented
    auth = '      [plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.net".auth]\n'
    broken = rendered.replace(auth, auth.lstrip(" "))
    assert broken != rendered
    assert keep_other_lines(original, broken, "c.toml", edits) == rendered
    # a rendering that changes the meaning of another line cannot be taken back: refused, one sentence
    worse = rendered.replace('  level = "info"\n', '  level = "debug"\n')
    with pytest.raises(ConfigError, match=r"^Editing c.toml would also change line 13, outside the edited key "
                                          r"plugins.io.containerd.grpc.v1.cri.containerd.snapshotter; nothing was written, set it by hand.$"):
        keep_other_lines(original, worse, "c.toml", edits)


def test_splice_takes_lines_back_and_the_guard_refuses_what_is_left():
    original = "a: 1\nb: True\n# note\nc : 3\n"
    assert splice(original, "a: 5\nb: true\n# note\nc: 3\n", {0}, {0}, "f", ["a"]) == ("a: 5\nb: True\n# note\nc : 3\n", [1, 3])
    assert splice(original, "a: 5\nb: True\nc : 3\n", {0}, {0}, "f", ["a"]) == (original.replace("1", "5"), [2])  # a dropped comment comes back
    with pytest.raises(ConfigError, match="^Editing f would also change line 2, outside the edited key a; nothing was written, set it by hand.$"):
        splice("a: 1\n# x\nb: 2\n", "a: 5\nb: 2\n", {0}, {0}, "f", ["a"])
    guard(original, "a: 5\nb: True\n# note\nc : 3\n", {0}, {0}, "f", ["a"])
    with pytest.raises(ConfigError, match="^Editing f would also change line 4, outside the edited keys a, b; nothing was written, set them by hand.$"):
        guard(original, "a: 5\nb: False\n# note\nc: 3\n", {0, 1}, {0, 1}, "f", ["a", "b"])


def test_json_keeps_its_spacing_and_commas():
    original = '{\n  "apiVersion" : "kubelet.config.k8s.io/v1beta1",\n  "kind" : "KubeletConfiguration",\n  "maxPods" : 110\n}\n'
    res = kpolicy.plan("/etc/kubernetes/kubelet/kubelet-config.json", original, settings={"imageGCHighThresholdPercent": 90, "containerLogMaxFiles": 3})
    assert res["after"] == ('{\n  "apiVersion" : "kubelet.config.k8s.io/v1beta1",\n  "containerLogMaxFiles": 3,\n  "imageGCHighThresholdPercent": 90,\n'
                            '  "kind" : "KubeletConfiguration",\n  "maxPods" : 110\n}\n')
    appended = kpolicy.plan("/x.json", '{\n  "kind" : "KubeletConfiguration",\n  "apiVersion" : "kubelet.config.k8s.io/v1beta1"\n}\n',
                            settings={"containerLogMaxFiles": 3})["after"]
    assert appended == '{\n  "kind" : "KubeletConfiguration",\n  "apiVersion" : "kubelet.config.k8s.io/v1beta1",\n  "containerLogMaxFiles": 3\n}\n'


def test_line_paths_know_multi_line_values():
    text = 'a = [\n  "x", # c ]\n  "y",\n]\n[t."q.r"]\n  s = """one\ntwo ]"""\n  u = 1\n'
    assert line_paths(text) == [("key", ("a",))] * 4 + [("table", ("t", "q.r"))] + [("key", ("t", "q.r", "s"))] * 2 + [("key", ("t", "q.r", "u"))]


# ------------------------------------------------------------------------ issue 39: paths another user controls


def user_link(tmp_path, target):
    """tmp_path/user (uid 65534's directory) holding its link config.yaml -> ``target``."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "config.yaml").symlink_to(target)
    os.chown(str(user / "config.yaml"), 65534, 65534, follow_symlinks=False)
    os.chown(str(user), 65534, 65534)
    return user / "config.yaml"


def tree_bytes(root):
    return {os.path.join(b, n): open(os.path.join(b, n), "rb").read() for b, _d, names in os.walk(str(root)) for n in names
            if not os.path.islink(os.path.join(b, n))}


def test_an_edit_through_another_users_directory_and_link_is_refused_and_a_read_warned(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.yaml").write_text(KUBELET)
    link = user_link(tmp_path, etc / "config.yaml")
    before = tree_bytes(tmp_path)
    with pytest.raises(ConfigError) as err:
        kubelet_run(tmp_path, path=str(link), settings={"imageGCHighThresholdPercent": 90})
    assert str(err.value) == ("Not writing %s: its path goes through %s, a directory owned by uid 65534 (nobody), not root, so another user could "
                              "redirect the write; nothing was written." % (link, tmp_path / "user"))
    assert tree_bytes(tmp_path) == before
    res = kubelet_run(tmp_path, check=True, path=str(link), settings={"imageGCHighThresholdPercent": 90})
    assert res["changes"] == [dict(key="imageGCHighThresholdPercent", before=85, after=90)] and res["resolved_path"] == str(etc / "config.yaml")
    (warning,) = [f for f in res["findings"] if f["code"] == "untrusted_path"]
    assert warning == dict(severity="warning", code="untrusted_path", message=(
        "%s is read through %s, a directory owned by uid 65534 (nobody), not root; %s, a symbolic link owned by uid 65534 (nobody), not root: "
        "another user can change what it holds, so kubenode.gc reports it (the daemons read it too) but will not write there" % (
            link, tmp_path / "user", link)))
    assert tree_bytes(tmp_path) == before


def test_runtime_config_writes_nothing_when_one_of_its_files_is_unsafe(tmp_path):
    """cri-o's storage.conf is written before crio.conf: when crio.conf's path is another user's, neither is written."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "storage.conf").write_text('[storage]\ndriver = "overlay"\ngraphroot = "/var/lib/containers/storage"\n')
    (etc / "crio.conf").write_text('[crio]\nroot = "/var/lib/containers/storage"\n')
    link = user_link(tmp_path, etc / "crio.conf")
    before = tree_bytes(tmp_path)
    with pytest.raises(ConfigError, match="^Not writing %s: its path goes through %s, a directory owned by uid 65534" % (link, tmp_path / "user")):
        runtime_run(runtime="crio", path=str(link), storage_path=str(etc / "storage.conf"), dropin_dir=str(tmp_path / "d"),
                    settings={"graphroot": "/data/storage"})
    assert tree_bytes(tmp_path) == before
    res = runtime_run(check=True, runtime="crio", path=str(link), storage_path=str(etc / "storage.conf"), dropin_dir=str(tmp_path / "d"),
                      settings={"graphroot": "/data/storage"})
    assert [f["code"] for f in res["findings"]].count("untrusted_path") == 1 and tree_bytes(tmp_path) == before


def test_in_a_sticky_directory_others_write_a_roots_file_is_edited_but_not_backed_up(tmp_path):
    """/tmp-like: root's file is written (only its owner may rename it), but a backup's name could be taken first."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(str(sticky), 0o1777)
    (sticky / "config.yaml").write_text(KUBELET)
    with pytest.raises(ConfigError, match="^Not backing up %s: its directory %s may be written by others" % (sticky / "config.yaml", sticky)):
        kubelet_run(tmp_path, path=str(sticky / "config.yaml"), settings={"imageGCHighThresholdPercent": 90}, backup=True)
    assert (sticky / "config.yaml").read_text() == KUBELET and os.listdir(str(sticky)) == ["config.yaml"]
    assert kubelet_run(tmp_path, path=str(sticky / "config.yaml"), settings={"imageGCHighThresholdPercent": 90})["changed"] is True
    assert "imageGCHighThresholdPercent: 90" in (sticky / "config.yaml").read_text()
