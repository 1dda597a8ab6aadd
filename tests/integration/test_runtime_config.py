# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.runtime_config on files in tmp_path, and its runtime findings against every real runtime."""

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import tomllib

import pytest

from devtools import runtimes
from tests.integration.conftest import RUNTIMES, read_only_tmpfs
from tests.integration.expectations import rpc_calls

pytestmark = pytest.mark.runtimes("every")

MODULE = "kubenode.gc.runtime_config"

V2 = """# containerd, by hand
version = 2
root = "/var/lib/containerd"   # moved later
oom_score = 0

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"

# metrics off
[metrics]
  address = ""
"""

V2_AFTER = """# containerd, by hand
version = 2
root = "/data/containerd"   # moved later
oom_score = 0

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"

# metrics off
[metrics]
  address = ""
"""

V3 = """version = 3
root = '/var/lib/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'   # the default
    max_concurrent_downloads = 3

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
"""

V3_AFTER = """version = 3
root = '/var/lib/containerd'
state = '/run/ctrd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'native'   # the default
    max_concurrent_downloads = 3

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
"""

STORAGE = """# containers-storage.conf
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"

[storage.options.overlay]
mountopt = "nodev,metacopy=on"
"""

CRIO = """# crio.conf
[crio]
root = "/var/lib/containers/storage"   # explicit: overrides storage.conf
log_dir = "/var/log/crio/pods"

[crio.image]
pause_image = "registry.k8s.io/pause:3.9"
"""


def write(path, text, mode=0o644):
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def state(*paths):
    """Bytes and mtime of every file (None when missing), to prove nothing was touched."""
    out = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                out[path] = (f.read(), os.stat(path).st_mtime_ns)
        except FileNotFoundError:
            out[path] = None
    return out


def run(ansible, args, interpreter=None, **kwargs):
    args = dict(args)
    args.setdefault("query_runtime", False)
    if interpreter:
        kwargs["interpreter"] = interpreter
    return ansible.module(MODULE, args, **kwargs)


def ok(res):
    assert not res.get("failed"), res.get("msg")
    return res


def one_sentence_failure(res):
    assert res.get("failed"), res
    msg = res["msg"]
    assert msg.endswith(".") and "\n" not in msg, msg
    return msg


def codes(res):
    return [f["code"] for f in res["findings"]]


# -- containerd -------------------------------------------------------------------


def test_containerd_v2_edit_keeps_comments_owner_and_mode(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", V2, 0o600)
    os.chown(path, 1234, 2345)
    settings = {"root": "/data/containerd/", "sandbox_image": "registry.k8s.io/pause:3.9", "snapshotter": "overlayfs"}
    res = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": settings, "backup": True}, interpreter))
    assert res["changed"] is True and res["runtime"] == "containerd"
    assert res["files"] == [path]
    assert open(path).read() == V2_AFTER
    st = os.stat(path)
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 1234, 2345)
    assert list(res["backup_files"]) == [path] and open(res["backup_files"][path]).read() == V2
    assert res["current"] == dict(
        config_version=2, root="/data/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="registry.k8s.io/pause:3.9",
        discard_unpacked_layers=False,
    )
    assert res["findings"] == []

    before = state(path)
    again = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": settings, "backup": True}, interpreter))
    assert again["changed"] is False and again["files"] == [] and again["backup_files"] == {}
    assert state(path) == before
    assert [f for f in os.listdir(tmp_path) if f.startswith("config.toml.")] == [os.path.basename(res["backup_files"][path])]
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []


def test_containerd_v3_edit_creates_pinned_images(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", V3)
    settings = {"snapshotter": "native", "sandbox_image": "registry.k8s.io/pause:3.10", "state": "/run/ctrd"}
    res = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": settings}, interpreter))
    assert res["changed"] is True
    assert open(path).read() == V3_AFTER
    assert res["current"]["config_version"] == 3 and res["current"]["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert ok(run(ansible, {"runtime": "containerd", "path": path, "settings": settings}, interpreter))["changed"] is False


def test_containerd_v3_pinned_images_check_real_idempotent_and_removed(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", V3_AFTER)
    pins = {"pinned_images": ["busybox", "registry.example/app:1"]}
    before = state(path)
    check = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": pins}, interpreter, check=True))
    assert check["changed"] is True and state(path) == before
    res = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": pins}, interpreter))
    assert res["changed"] is True and res["files"] == [path]
    assert open(path).read() == V3_AFTER.replace(
        "      sandbox = 'registry.k8s.io/pause:3.10'\n",
        "      sandbox = 'registry.k8s.io/pause:3.10'\n"
        "      'kubenode-gc/docker.io/library/busybox:latest' = 'docker.io/library/busybox:latest'\n"
        "      'kubenode-gc/registry.example/app:1' = 'registry.example/app:1'\n",
    )
    assert res["current"]["pinned_images"] == ["docker.io/library/busybox:latest", "registry.example/app:1"]
    assert res["changes"] == [{"key": "pinned_images", "before": [], "after": ["docker.io/library/busybox:latest", "registry.example/app:1"]}]
    assert ok(run(ansible, {"runtime": "containerd", "path": path, "settings": pins}, interpreter))["changed"] is False
    emptied = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": {"pinned_images": []}}, interpreter))
    assert emptied["changed"] is True and open(path).read() == V3_AFTER
    assert emptied["current"]["sandbox_image"] == "registry.k8s.io/pause:3.10"


def test_check_and_diff_write_nothing(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", V2)
    before = state(path)
    res = ok(
        run(
            ansible,
            {"runtime": "containerd", "path": path, "settings": {"root": "/data/containerd", "sandbox_image": "registry.k8s.io/pause:3.9"}},
            interpreter,
            check=True,
            diff=True,
        )
    )
    assert res["changed"] is True and res["files"] == [path]
    assert res["diff"] == [{"before": V2, "after": V2_AFTER, "before_header": path, "after_header": path}]
    assert res["current"]["root"] == "/data/containerd"
    assert state(path) == before


def test_read_only_reports_values_and_version_1(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", '[plugins.cri]\n  sandbox_image = "k8s.gcr.io/pause:3.2"\n')
    before = state(path)
    res = ok(run(ansible, {"runtime": "containerd", "path": path}, interpreter))
    assert res["changed"] is False and res["runtime"] == "containerd" and res["files"] == []
    assert res["current"] == dict(
        config_version=1, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="k8s.gcr.io/pause:3.2",
        discard_unpacked_layers=False,
    )
    assert [(f["severity"], f["code"]) for f in res["findings"]] == [("warning", "config_version_1")]
    assert state(path) == before


def test_greenfield_content_creates_the_file(ansible, tmp_path, interpreter):
    path = str(tmp_path / "new" / "config.toml")
    os.mkdir(tmp_path / "new")
    res = ok(
        run(ansible, {"runtime": "containerd", "path": path, "content": "# from a template\n", "settings": {"root": "/data/c"}, "mode": "0640"}, interpreter)
    )
    assert res["changed"] is True and res["files"] == [path]
    assert open(path).read() == '# from a template\nversion = 2\nroot = "/data/c"\n'
    assert os.stat(path).st_mode & 0o7777 == 0o640
    again = ok(run(ansible, {"runtime": "containerd", "path": path, "content": "# from a template\n", "settings": {"root": "/data/c"}}, interpreter))
    assert again["changed"] is False


# -- CRI-O ----------------------------------------------------------------------------


def test_crio_edits_storage_conf_and_crio_conf(ansible, tmp_path, interpreter):
    storage = write(tmp_path / "storage.conf", STORAGE)
    crio = write(tmp_path / "crio.conf", CRIO)
    dropins = tmp_path / "crio.conf.d"
    dropins.mkdir()
    dropin = write(dropins / "20-pause.conf", '[crio.image]\npause_image = "registry.k8s.io/pause:3.8"\n')
    write(dropins / "00-default", '[crio.runtime]\nlog_level = "info"\n')  # any name: cri-o reads every file of the directory
    args = {
        "path": crio,
        "storage_path": storage,
        "dropin_dir": str(dropins),
        "settings": {"graphroot": "/data/storage", "driver": "overlay", "pause_image": "registry.k8s.io/pause:3.10"},
    }
    res = ok(run(ansible, args, interpreter, diff=True))  # runtime detected from the crio-only options
    assert res["changed"] is True and res["runtime"] == "crio"
    assert res["files"] == [crio, storage]
    assert open(storage).read() == STORAGE.replace('graphroot = "/var/lib/containers/storage"', 'graphroot = "/data/storage"')
    assert open(crio).read() == CRIO.replace('root = "/var/lib/containers/storage"', 'root = "/data/storage"').replace("pause:3.9", "pause:3.10")
    assert [d["before_header"] for d in res["diff"]] == [crio, storage]
    assert res["current"] == dict(
        graphroot="/data/storage", runroot="/run/containers/storage", imagestore=None, driver="overlay", pause_image="registry.k8s.io/pause:3.8"
    )
    assert codes(res) == ["dropin_overrides"]
    assert dropin in res["findings"][0]["message"]
    before = state(storage, crio, dropin)
    assert ok(run(ansible, args, interpreter))["changed"] is False
    assert state(storage, crio, dropin) == before


def test_crio_read_only_mismatch(ansible, tmp_path, interpreter):
    storage = write(tmp_path / "storage.conf", STORAGE)
    crio = write(tmp_path / "crio.conf", CRIO.replace('root = "/var/lib/containers/storage"', 'root = "/srv/crio"'))
    before = state(storage, crio)
    res = ok(run(ansible, {"runtime": "crio", "path": crio, "storage_path": storage, "dropin_dir": str(tmp_path / "none")}, interpreter))
    assert res["changed"] is False and res["current"]["graphroot"] == "/srv/crio"
    assert [(f["severity"], f["code"]) for f in res["findings"]] == [("warning", "crio_root_mismatch")]
    assert state(storage, crio) == before


# -- against the real runtimes ----------------------------------------------------------


def _copy(src, dest, replace):
    text = open(src).read()
    for key, value in replace.items():
        text, count = re.subn(r'(?m)^(\s*%s = )".*"$' % key, r'\1"%s"' % value, text)
        assert count == 1, key
    return write(dest, text)


def config_args(runtime, tmp_path, in_place=False, **replace):
    """runtime_config arguments for a copy of the runtime's own config files (``in_place``: the files themselves), with
    ``replace`` (root, sandbox_image, imagestore) applied where this runtime keeps them."""
    if runtime.kind == "containerd":
        keys = {"root": "root", "sandbox_image": "sandbox_image" if runtime.major < 2 else "sandbox"}
        path = _copy(runtime.config_path, pathlib.Path(runtime.config_path) if in_place else tmp_path / "config.toml", {keys[k]: v for k, v in replace.items()})
        return {"runtime": "containerd", "path": path}
    # CRI-O: crio.conf's [crio] overrides storage.conf, so a path changes in both
    crio_keys = {"root": "root", "sandbox_image": "pause_image", "imagestore": "imagestore"}
    storage_keys = {"root": "graphroot", "imagestore": "imagestore"}
    crio = _copy(runtime.config_path, pathlib.Path(runtime.config_path) if in_place else tmp_path / "crio.conf", {crio_keys[k]: v for k, v in replace.items()})
    storage = _copy(runtime.storage_conf, pathlib.Path(runtime.storage_conf) if in_place else tmp_path / "storage.conf",
                    {storage_keys[k]: v for k, v in replace.items() if k in storage_keys})
    return {"runtime": "crio", "path": crio, "storage_path": storage, "dropin_dir": runtime.dropin_dir}


@contextlib.contextmanager
def own_config(runtime, **replace):
    """The running runtime's own config files with ``replace`` (root, sandbox_image, imagestore) applied where this
    runtime keeps them, put back as they were afterwards (the runtime read them when it started, so it runs on)."""
    files = [runtime.config_path] + ([runtime.storage_conf] if runtime.kind == "cri-o" else [])
    saved = {path: open(path, encoding="utf-8").read() for path in files}
    try:
        args = config_args(runtime, None, in_place=True, **replace)
        yield args
    finally:
        for path, text in saved.items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


def test_runtime_findings_against_the_running_runtime(ansible, runtime, tmp_path, interpreter):
    """Only the CRI endpoint is given: the module reads the files of the runtime listening there (its own, edited here)."""
    if runtime.kind == "docker":
        return  # dockerd's configuration is read only: its findings are test_docker.py's
    crio = runtime.kind == "cri-o"
    root_key, image_key = ("graphroot", "pause_image") if crio else ("root", "sandbox_image")
    query = {"cri_endpoint": runtime.endpoint, "query_runtime": True}
    # its own config: root (and imagestore) on the filesystems it reports, same sandbox image
    with own_config(runtime):
        res = ok(run(ansible, query, interpreter))
    assert res["changed"] is False and res["current"][root_key] == runtime.root
    if crio:
        assert res["current"]["imagestore"] == runtime.imagestore
    assert res["rpc_calls"] == rpc_calls(runtime, {"Version": 1, "Status": 1, "ImageFsInfo": 1}, pods=False)
    assert res["findings"] == []

    # root elsewhere (tmp_path is on no tmpfs of the runtime), as the file says and as a change; the runtime still names
    # the root it runs with (containerd in its CRI status, cri-o in its configuration, GET /config)
    differs = ["daemon_differs_from_files"]
    assert os.stat(str(tmp_path)).st_dev != os.stat(runtime.imagefs_mountpoint).st_dev
    with own_config(runtime, root=str(tmp_path / "root")):
        res = ok(run(ansible, query, interpreter))
    assert codes(res) == differs + ["root_not_on_imagefs"]
    assert res["findings"][0]["message"] == "The runtime at %s reports %s %s in %s, but its files and command line give %s." % (
        runtime.endpoint, root_key, runtime.root, "its configuration (GET /config)" if crio else "its CRI status", tmp_path / "root")
    # with cri-o's imagestore, graphroot holds the containers: it belongs on the container filesystem
    kind, mount = ("container", runtime.containerfs_mountpoint) if crio else ("image", runtime.imagefs_mountpoint)
    assert res["findings"][-1]["message"] == "%s %s is not on the filesystem of the %s filesystem %s that the runtime at %s reports." % (
        root_key,
        tmp_path / "root",
        kind,
        mount,
        runtime.endpoint,
    )
    with own_config(runtime):
        res = ok(run(ansible, dict(query, settings={root_key: str(tmp_path / "new")}), interpreter))
    assert res["changed"] is True and codes(res) == differs + ["root_not_on_imagefs"]
    assert all(f["message"].endswith(" (a restart applies the new value).") for f in res["findings"])
    if crio:
        with own_config(runtime, imagestore=str(tmp_path / "store")):
            res = ok(run(ansible, query, interpreter))
        assert [f["message"] for f in res["findings"]] == [
            "The runtime at %s reports imagestore %s in its configuration (GET /config), but its files and command line give %s."
            % (runtime.endpoint, runtime.imagestore, tmp_path / "store"),
            "imagestore %s is not on the filesystem of the image filesystem %s that the runtime at %s reports."
            % (tmp_path / "store", runtime.imagefs_mountpoint, runtime.endpoint),
        ]

    # another sandbox image, in a copy (containerd 2.x names its sandbox image only in the file it was started with,
    # which must stay as it is for that): the module says the runtime does not read the copy
    res = ok(run(ansible, dict(config_args(runtime, tmp_path, sandbox_image="registry.k8s.io/pause:3.10"), **query), interpreter))
    assert codes(res) == ["daemon_reads_other_file", "sandbox_image_mismatch"]
    assert res["findings"][1]["message"] == "The config sets %s registry.k8s.io/pause:3.10 but the runtime at %s uses %s." % (
        image_key,
        runtime.endpoint,
        runtime.sandbox_image,
    )


def test_unreachable_runtime_is_an_info_finding(ansible, tmp_path, interpreter):
    path = write(tmp_path / "config.toml", V2)
    endpoint = "unix://%s" % (tmp_path / "nothing.sock")
    res = ok(run(ansible, {"runtime": "containerd", "path": path, "cri_endpoint": endpoint, "query_runtime": True}, interpreter))
    assert [(f["severity"], f["code"]) for f in res["findings"]] == [("info", "runtime_unreachable")]
    assert endpoint in res["findings"][0]["message"]


def test_validate_with_the_runtimes_own_config_check(ansible, runtime, tmp_path):
    """validate runs the runtime's own parser on the new file: containerd config dump, crio config."""
    if runtime.kind == "docker":
        return  # runtime_config never writes dockerd's configuration (test_docker.py)
    args = config_args(runtime, tmp_path)
    if runtime.kind == "containerd":
        check, setting, shown = runtime.binary("containerd") + " --config %s config dump", {"snapshotter": "native"}, "snapshotter = .native."
    else:
        check = runtime.binary("crio") + " --config %s --config-dir " + runtime.dropin_dir + " config"
        setting, shown = {"pause_image": "registry.k8s.io/pause:3.10"}, "pause_image = .registry.k8s.io/pause:3.10."
    res = ok(run(ansible, dict(args, settings=setting, validate=check)))
    assert res["changed"] is True
    dumped = subprocess.run((check % args["path"]).split(), capture_output=True, text=True, check=True).stdout
    assert re.search(shown, dumped), dumped[:2000]


def test_failing_validate_writes_nothing(ansible, tmp_path):
    path = write(tmp_path / "config.toml", V2)
    before = state(path)
    res = run(ansible, {"runtime": "containerd", "path": path, "settings": {"root": "/data"}, "validate": "sh -c 'echo broken config >&2; exit 3' %s"})
    msg = one_sentence_failure(res)
    assert msg.startswith("The validate command ") and "rejected the new %s (rc 3): broken config." % path in msg
    assert state(path) == before
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith(".config")) == []


# -- bad input: one sentence, every file unchanged --------------------------------------------


@pytest.fixture
def read_only_dir(tmp_path):
    with read_only_tmpfs(tmp_path / "ro", {"config.toml": V2}) as mnt:
        yield mnt


BAD = {
    "malformed": (
        "containerd",
        V2.replace("oom_score = 0", "oom_score = "),
        {"root": "/data"},
        r"^(?P<path>\S+) is not valid TOML at line 4, column \d+: .+\.$",
    ),
    "relative_root": ("containerd", V2, {"root": "data/containerd"}, r"^settings\.root must be an absolute path, got 'data/containerd'\.$"),
    "unknown_key": (
        "containerd",
        V2,
        {"graphroot": "/data"},
        r"^Unknown settings key graphroot for runtime containerd; the supported keys are root, state, snapshotter, sandbox_image, "
        r"discard_unpacked_layers, pinned_images\.$",
    ),
    "pins_on_version_2": (
        "containerd",
        V2,
        {"pinned_images": ["registry.example/app:1"]},
        r"^settings\.pinned_images needs a version 3 config \(containerd 2\.x\); (?P<path>\S+) is a version 2 config, "
        r"in which containerd pins only its sandbox image\.$",
    ),
    "pins_not_references": ("containerd", V3, {"pinned_images": ["Bad Name"]},
                            r"^settings\.pinned_images must hold image references such as .*, got 'Bad Name'\.$"),
    "bad_driver": ("crio", STORAGE, {"driver": "overlay3"}, r"^settings\.driver must be one of overlay, vfs, btrfs, zfs, devmapper, aufs, got 'overlay3'\.$"),
    "missing_file": ("containerd", None, {"root": "/data"}, r"^(?P<path>\S+) does not exist; set content to create it\.$"),
    "version_1": (
        "containerd",
        '[plugins.cri]\n  sandbox_image = "x"\n',
        {"root": "/data"},
        r"^(?P<path>\S+) is a version 1 config, .*'containerd config migrate' first\.$",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_fails_in_one_sentence_and_changes_nothing(ansible, tmp_path, case):
    runtime, text, settings, message = BAD[case]
    main = tmp_path / ("config.toml" if runtime == "containerd" else "crio.conf")
    storage = tmp_path / "storage.conf"
    if text is not None:
        write(storage if runtime == "crio" else main, text)
    if runtime == "crio":
        write(main, CRIO)
    before = state(str(main), str(storage))
    args = {"runtime": runtime, "path": str(main), "settings": settings}
    if runtime == "crio":
        args["storage_path"] = str(storage)
    res = run(ansible, args)
    found = re.match(message, one_sentence_failure(res))
    assert found, res["msg"]
    if "path" in found.groupdict():
        assert found.group("path") == str(main)
    assert state(str(main), str(storage)) == before


def test_read_only_file_fails_and_stays(ansible, read_only_dir):
    path = str(read_only_dir / "config.toml")
    before = state(path)
    res = run(ansible, {"runtime": "containerd", "path": path, "settings": {"root": "/data"}})
    assert one_sentence_failure(res) == "Cannot write %s: Read-only file system." % path
    assert state(path) == before


# -- containerd imports: the module's effective values are containerd's own (config dump) ---------------

CONTAINERD_BUILDS = [pytest.param(n, id=runtimes.TEST_IDS[n]) for n in RUNTIMES if n.startswith("containerd-")]


def containerd_binary(name):
    """(the containerd binary of that build, its config version): 2 for 1.x, 3 for 2.x."""
    line = name[len("containerd-"):]
    bin_dir = runtimes.containerd_bin_dir(line)
    return os.path.join(bin_dir, "containerd") if bin_dir else "containerd", 3 if line.startswith("2") else 2


def dumped(binary, path, version):
    """root, state, snapshotter and sandbox_image as ``containerd --config path config dump`` shows them."""
    out = subprocess.run([binary, "--config", path, "config", "dump"], capture_output=True, text=True, check=True).stdout
    data = tomllib.loads(out)
    if version == 3:
        images = data["plugins"]["io.containerd.cri.v1.images"]
        return dict(root=data["root"], state=data["state"], snapshotter=images["snapshotter"], sandbox_image=images["pinned_images"]["sandbox"])
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    return dict(root=data["root"], state=data["state"], snapshotter=cri["containerd"]["snapshotter"], sandbox_image=cri["sandbox_image"])


def import_tree(tmp_path, version):
    """A main config.toml importing conf.d/*.toml (absolute glob: containerd 1.6 globs relative to its working
    directory) and extra.toml, which imports sub/nested.toml; returns (main, {name: path})."""
    conf, sub = tmp_path / "conf.d", tmp_path / "sub"
    conf.mkdir()
    sub.mkdir()
    if version == 3:
        main = (
            "version = 3\nroot = '%s/main-root'\nstate = '%s/main-state'\nimports = ['%s/*.toml', 'extra.toml']\n\n"
            "[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'native'\n"
            "  [plugins.'io.containerd.cri.v1.images'.pinned_images]\n    sandbox = 'registry.k8s.io/pause:3.10'\n" % (tmp_path, tmp_path, conf)
        )
        # 2.x merges tables key by key: the sandbox of the main file stays, the nested import's snapshotter wins
        a = "version = 3\nroot = '%s/a-root'\n[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 5\n" % tmp_path
        nested = "version = 3\nstate = '%s/nested-state'\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'btrfs'\n" % tmp_path
    else:
        main = (
            'version = 2\nroot = "%s/main-root"\nstate = "%s/main-state"\nimports = ["%s/*.toml", "extra.toml"]\n\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
            '  [plugins."io.containerd.grpc.v1.cri".containerd]\n    snapshotter = "native"\n' % (tmp_path, tmp_path, conf)
        )
        # 1.x: a registry drop-in replaces the main file's whole CRI table, sandbox_image and snapshotter included
        a = 'version = 2\nroot = "%s/a-root"\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"\n' % tmp_path
        nested = 'version = 2\nstate = "%s/nested-state"\n' % tmp_path
    files = dict(
        main=write(tmp_path / "config.toml", main),
        a=write(conf / "10-a.toml", a),
        extra=write(tmp_path / "extra.toml", "imports = ['sub/nested.toml']\n"),
        nested=write(sub / "nested.toml", nested),
    )
    return files["main"], files


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
def test_effective_values_are_containerds_own_merge_of_the_imports(ansible, tmp_path, name):
    binary, version = containerd_binary(name)
    main, files = import_tree(tmp_path, version)
    res = ok(run(ansible, {"runtime": "containerd", "path": main}))
    theirs = dumped(binary, main, version)
    current = {k: v for k, v in res["current"].items() if k != "config_version"}
    assert current["root"] == theirs["root"] == "%s/a-root" % tmp_path
    assert current["state"] == theirs["state"] == "%s/nested-state" % tmp_path
    assert current["snapshotter"] == theirs["snapshotter"] == ("btrfs" if version == 3 else "overlayfs")
    if version == 3:
        assert current["sandbox_image"] == theirs["sandbox_image"] == "registry.k8s.io/pause:3.10"
    else:  # the runtime's default, which depends on its version: the module says null
        empty = write(tmp_path / "empty.toml", "version = 2\n")
        assert current["sandbox_image"] is None and theirs["sandbox_image"] == dumped(binary, empty, 2)["sandbox_image"] != "registry.k8s.io/pause:3.10"
    overridden = ["root", "state", "snapshotter"] + ([] if version == 3 else ["sandbox_image"])
    # version 2: the main file's snapshotter is where containerd 2.x would drop it (no runtimes table), which it says too
    dropped = [] if version == 3 else [f for f in res["findings"] if f["code"] == "dropped_by_containerd_2"]
    assert len(dropped) == (0 if version == 3 else 1) and all(f["severity"] == "info" for f in dropped)
    res["findings"] = [f for f in res["findings"] if f not in dropped]
    assert codes(res) == ["import_overrides"] * len(overridden)
    sources = dict(root=files["a"], state=files["nested"], snapshotter=files["nested" if version == 3 else "a"], sandbox_image=files["a"])
    assert sorted(f["message"].split(" ")[2] for f in res["findings"]) == sorted(sources[k] for k in overridden)
    assert {f["severity"] for f in res["findings"]} == {"warning"}
    assert res["changed"] is False and res["files"] == []


DISCARD_V2 = ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
              '  [plugins."io.containerd.grpc.v1.cri".containerd]\n    default_runtime_name = "runc"\n')
DISCARD_RUNTIMES = '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n      runtime_type = "io.containerd.runc.v2"\n'


def dumped_discard(binary, path):
    """discard_unpacked_layers as ``containerd config dump`` shows it: 2.x dumps version 3 (the CRI images plugin), 1.x
    version 2 (the CRI plugin's containerd table)."""
    data = tomllib.loads(subprocess.run([binary, "--config", path, "config", "dump"], capture_output=True, text=True, check=True).stdout)
    if "io.containerd.cri.v1.images" in data["plugins"] and data.get("version", 2) >= 3:
        return data["plugins"]["io.containerd.cri.v1.images"]["discard_unpacked_layers"]
    return data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["discard_unpacked_layers"]


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
def test_discard_unpacked_layers_is_written_where_each_containerd_reads_it(ansible, tmp_path, name):
    """Version 2 (with and without a runtimes table) on every line, version 3 on 2.x: containerd config dump shows the
    value the module wrote and reports; a hand-written version 2 key that 2.x drops is a finding, and 2.x really drops it."""
    binary, version = containerd_binary(name)
    texts = dict(v2=DISCARD_V2, v2_runtimes=DISCARD_V2 + DISCARD_RUNTIMES)
    if version == 3:
        texts["v3"] = "version = 3\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs'\n"
    for label, text in texts.items():
        path = write(tmp_path / ("%s.toml" % label), text)
        assert dumped_discard(binary, path) is False, label
        for value in (True, False):
            res = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": {"discard_unpacked_layers": value},
                                   "validate": binary + " --config %s config dump"}))
            assert res["changed"] is True, label  # true, then false written in its place
            assert res["current"]["discard_unpacked_layers"] is value and dumped_discard(binary, path) is value, (label, open(path).read())
            assert "dropped_by_containerd_2" not in codes(res)
            again = ok(run(ansible, {"runtime": "containerd", "path": path, "settings": {"discard_unpacked_layers": value}}))
            assert again["changed"] is False
    # written by hand where 2.x drops it: the module says so, and that is what this containerd does
    path = write(tmp_path / "by-hand.toml", DISCARD_V2.replace('    default_runtime_name = "runc"\n', '    discard_unpacked_layers = true\n'))
    res = ok(run(ansible, {"runtime": "containerd", "path": path}))
    assert res["current"]["discard_unpacked_layers"] is True and codes(res) == ["dropped_by_containerd_2"]
    assert dumped_discard(binary, path) is (version != 3)


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
def test_a_setting_an_import_overrides_is_refused_and_nothing_changes(ansible, tmp_path, name):
    binary, version = containerd_binary(name)
    main, files = import_tree(tmp_path, version)
    before = state(*files.values())
    res = run(ansible, {"runtime": "containerd", "path": main, "settings": {"root": "/srv/containerd"}})
    assert one_sentence_failure(res) == (
        "The import %s sets root = '%s/a-root', which overrides the settings.root '/srv/containerd' for %s (imports win over the main file); "
        "nothing was changed, edit or remove that import first." % (files["a"], tmp_path, main)
    )
    assert state(*files.values()) == before and res.get("changed") is False
    if version == 2:  # the import's CRI table hides the main file's sandbox_image from containerd 1.x
        res = run(ansible, {"runtime": "containerd", "path": main, "settings": {"sandbox_image": "registry.k8s.io/pause:3.9"}})
        assert "replaces the whole [plugins.'io.containerd.grpc.v1.cri'] table without sandbox_image" in one_sentence_failure(res)
        assert state(*files.values()) == before
    else:  # a key no import sets is edited in the main file, and containerd agrees
        res = ok(run(ansible, {"runtime": "containerd", "path": main, "settings": {"sandbox_image": "registry.k8s.io/pause:3.9"}}))
        assert res["files"] == [main] and res["current"]["sandbox_image"] == dumped(binary, main, 3)["sandbox_image"] == "registry.k8s.io/pause:3.9"
        assert state(files["a"], files["extra"], files["nested"]) == {k: v for k, v in before.items() if k != main}
    # a broken or missing import: one sentence naming it, nothing written
    before = state(*files.values())
    write(tmp_path / "sub" / "nested.toml", "[plugins\n")
    res = run(ansible, {"runtime": "containerd", "path": main, "settings": {"sandbox_image": "registry.k8s.io/pause:3.8"}})
    assert re.match(r"^%s is not valid TOML at line 1, column \d+: .+\.$" % re.escape(files["nested"]), one_sentence_failure(res)), res["msg"]
    os.unlink(files["nested"])
    res = run(ansible, {"runtime": "containerd", "path": main})
    assert one_sentence_failure(res) == (
        "%s imports %s, which does not exist, so containerd would not start; create it or remove the import." % (files["extra"], files["nested"])
    )
    assert state(main, files["a"], files["extra"]) == {k: v for k, v in before.items() if k != files["nested"]}


# -- issue 11, item 4: secrets never in results; item 5: symlinked config files --------------------------------------

PASSWORD = "ctrd-pull-robot-Pa55w0rd!"
AUTH = "cm9ib3Q6Y3RyZC1wdWxsLXJvYm90LVBhNTV3MHJkIQ=="
IDENTITY = "idt-7f3c2a9b1e"
V2_SECRETS = V2 + """
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "%s"
  auth = "%s"
  identitytoken = "%s"
""" % (PASSWORD, AUTH, IDENTITY)
CRIO_TOKEN = "crio-registry-token-5e6f7a8b"
# cri-o has no inline credential key of its own (global_auth_file names a file); a site's table with one is redacted by name
CRIO_SECRETS = CRIO + """global_auth_file = "/etc/crio/auth.json"

[crio.site]
registry_token = "%s"
""" % CRIO_TOKEN
MARKER = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


@pytest.mark.parametrize("check, diff", [(False, False), (False, True), (True, False), (True, True)])
def test_registry_credentials_are_in_no_result(ansible, tmp_path, interpreter, check, diff):
    path = write(tmp_path / "config.toml", V2_SECRETS)
    args = {"runtime": "containerd", "path": path}
    read = ok(run(ansible, args, interpreter, check=check, diff=diff))
    res = ok(run(ansible, dict(args, settings={"root": "/data/containerd"}), interpreter, check=check, diff=diff))
    for result in (read, res):
        dumped = json.dumps(result)
        assert PASSWORD not in dumped and AUTH not in dumped and IDENTITY not in dumped
    assert res["changed"] is True and res["current"]["root"] == "/data/containerd"
    if diff:
        (d,) = res["diff"]
        assert 'root = "/var/lib/containerd"' in d["before"] and 'root = "/data/containerd"' in d["after"]
        assert d["after"].count(MARKER) == 4 and d["before"].replace("/var/lib/containerd", "/data/containerd") == d["after"]
    else:
        assert "diff" not in res
    edited = V2_SECRETS.replace('root = "/var/lib/containerd"', 'root = "/data/containerd"')
    assert open(path).read() == (V2_SECRETS if check else edited)  # the credentials themselves stay


@pytest.mark.parametrize("check", [False, True])
def test_crio_credentials_are_in_no_result(ansible, tmp_path, interpreter, check):
    storage = write(tmp_path / "storage.conf", STORAGE)
    crio = write(tmp_path / "crio.conf", CRIO_SECRETS)
    args = {"runtime": "crio", "path": crio, "storage_path": storage, "dropin_dir": str(tmp_path / "none"), "settings": {"graphroot": "/data/storage"}}
    res = ok(run(ansible, args, interpreter, check=check, diff=True))
    assert res["changed"] is True and CRIO_TOKEN not in json.dumps(res)
    assert [d["before_header"] for d in res["diff"]] == [crio, storage]
    assert 'registry_token = "%s"' % MARKER in res["diff"][0]["after"] and 'global_auth_file = "/etc/crio/auth.json"' in res["diff"][0]["after"]
    assert 'root = "/data/storage"' in res["diff"][0]["after"]
    assert CRIO_TOKEN in open(crio).read()


def test_symlinked_files_are_edited_at_their_targets(ansible, tmp_path, interpreter):
    etc = tmp_path / "etc"
    etc.mkdir()
    target = write(etc / "config.toml", V2, 0o640)
    os.chown(target, 1234, 2345)
    os.symlink("etc/config.toml", tmp_path / "config.toml")
    link = str(tmp_path / "config.toml")
    settings = {"root": "/data/containerd/", "sandbox_image": "registry.k8s.io/pause:3.9", "snapshotter": "overlayfs"}
    res = ok(run(ansible, {"runtime": "containerd", "path": link, "settings": settings, "backup": True}, interpreter))
    assert res["changed"] is True and res["files"] == [link]
    assert res["resolved_path"] == target and res["resolved_files"] == {link: target}
    assert os.path.islink(link) and os.readlink(link) == "etc/config.toml"
    assert open(target).read() == V2_AFTER
    st = os.stat(target)
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 1234, 2345)
    assert os.path.dirname(res["backup_files"][link]) == str(etc) and open(res["backup_files"][link]).read() == V2
    assert ok(run(ansible, {"runtime": "containerd", "path": link, "settings": settings}, interpreter))["changed"] is False

    # cri-o: storage.conf and crio.conf both links (a chain for storage.conf)
    write(etc / "storage.conf", STORAGE)
    write(etc / "crio.conf", CRIO)
    os.symlink(str(etc / "storage.conf"), tmp_path / "storage-real.conf")
    os.symlink("storage-real.conf", tmp_path / "storage.conf")
    os.symlink(str(etc / "crio.conf"), tmp_path / "crio.conf")
    args = {"runtime": "crio", "path": str(tmp_path / "crio.conf"), "storage_path": str(tmp_path / "storage.conf"), "dropin_dir": str(tmp_path / "none"),
            "settings": {"graphroot": "/data/storage"}}
    res = ok(run(ansible, args, interpreter))
    assert res["resolved_files"] == {str(tmp_path / "crio.conf"): str(etc / "crio.conf"), str(tmp_path / "storage.conf"): str(etc / "storage.conf")}
    assert res["resolved_path"] == str(etc / "crio.conf")
    assert all(os.path.islink(tmp_path / n) for n in ("crio.conf", "storage.conf", "storage-real.conf"))
    assert 'graphroot = "/data/storage"' in open(etc / "storage.conf").read() and 'root = "/data/storage"' in open(etc / "crio.conf").read()


def test_dangling_symlink_fails_and_changes_nothing(ansible, tmp_path):
    link = tmp_path / "config.toml"
    os.symlink(str(tmp_path / "gone" / "config.toml"), link)
    res = run(ansible, {"runtime": "containerd", "path": str(link), "content": V2, "settings": {"root": "/data"}})
    assert one_sentence_failure(res) == "%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (
        link, tmp_path / "gone" / "config.toml")
    assert not os.path.exists(tmp_path / "gone") and os.readlink(link) == str(tmp_path / "gone" / "config.toml")


# -- issue 21 items 2, 3, 7 and issue 23's byte guard: every other byte kept, no URL password, no odd file read ------------

KUBESPRAY = os.path.join(os.path.dirname(__file__), "..", "fixtures", "kubespray", "config.toml")
MIRROR_PASSWORD = "mirr0r-pass-7e6d"


def kubespray_toml():
    """kubespray v2.26's rendered config.toml, its docker.io mirror endpoint holding credentials."""
    with open(KUBESPRAY, "rb") as f:
        return f.read().replace(b"https://mirror.example.net", b"https://puller:%s@mirror.example.net" % MIRROR_PASSWORD.encode())


def playbook_output(ansible, args, diff=True):
    """(registered result, ansible-playbook's stdout) of one runtime_config task run with --diff."""
    out = os.path.join(str(ansible.workdir), "diff-result.json")
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Edit", MODULE: dict(args, query_runtime=False), "register": "result"},
        {"ansible.builtin.copy": {"content": "{{ result | to_json }}", "dest": out, "mode": "0600"}, "diff": False}]}]
    playbook = os.path.join(str(ansible.workdir), "diff-play.yml")
    with open(playbook, "w", encoding="utf-8") as f:
        json.dump(play, f)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=" + sys.executable, playbook] + (["--diff"] if diff else [])
    proc = subprocess.run(cmd, env=ansible.env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, encoding="utf-8") as f:
        return json.load(f), proc.stdout + proc.stderr


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
def test_kubespray_config_keeps_every_other_byte_and_no_url_password_is_shown(ansible, tmp_path, name):
    raw = kubespray_toml()
    path = tmp_path / "config.toml"
    path.write_bytes(raw)
    binary, version = containerd_binary(name)
    before = dumped(binary, str(path), version)
    settings = {"root": "/data/containerd", "snapshotter": "native"}
    res, output = playbook_output(ansible, {"runtime": "containerd", "path": str(path), "settings": settings})
    assert res["changed"] is True
    for text in (output, json.dumps(res)):
        assert MIRROR_PASSWORD not in text and "puller:" not in text and "s3cr3t-pull-pass" not in text
    assert '+root = "/data/containerd"' in output and '+      snapshotter = "native"' in output
    assert 'endpoint = ["https://VALUE_SPECIFIED_IN_NO_LOG_PARAMETER@mirror.example.net"]' in res["diff"][0]["after"]
    assert path.read_bytes() == raw.replace(b'root = "/var/lib/containerd"', b'root = "/data/containerd"').replace(
        b'snapshotter = "overlayfs"', b'snapshotter = "native"')
    assert dumped(binary, str(path), version) == dict(before, root="/data/containerd", snapshotter="native")
    mtime = os.stat(path).st_mtime_ns
    again, output = playbook_output(ansible, {"runtime": "containerd", "path": str(path), "settings": settings})
    assert again["changed"] is False and os.stat(path).st_mtime_ns == mtime and MIRROR_PASSWORD not in output


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
def test_crlf_config_stays_crlf(ansible, tmp_path, name):
    raw = kubespray_toml().replace(b"\n", b"\r\n")
    path = tmp_path / "config.toml"
    path.write_bytes(raw)
    binary, version = containerd_binary(name)
    res = ok(run(ansible, {"runtime": "containerd", "path": str(path), "settings": {"root": "/data/containerd"}}))
    assert res["changed"] is True
    assert path.read_bytes() == raw.replace(b'root = "/var/lib/containerd"', b'root = "/data/containerd"')
    assert dumped(binary, str(path), version)["root"] == "/data/containerd"
    assert ok(run(ansible, {"runtime": "containerd", "path": str(path), "settings": {"root": "/data/containerd"}}))["changed"] is False


def test_fifo_and_char_device_fail_at_once(ansible, tmp_path):
    fifo = tmp_path / "storage.conf"
    os.mkfifo(fifo)
    crio = write(tmp_path / "crio.conf", "[crio]\n")
    zero = tmp_path / "config.toml"
    zero.symlink_to("/dev/zero")
    cases = [({"runtime": "crio", "path": crio, "storage_path": str(fifo), "dropin_dir": str(tmp_path / "none"), "settings": {"graphroot": "/data"}},
              "%s is a FIFO" % fifo),
             ({"runtime": "containerd", "path": str(zero), "settings": {"root": "/data"}}, "%s is a character device" % zero)]
    for args, start in cases:
        began = time.monotonic()
        res = run(ansible, args)
        assert time.monotonic() - began < 60
        assert one_sentence_failure(res).startswith(start + ", not a regular file;")
    assert os.readlink(zero) == "/dev/zero" and open(crio).read() == "[crio]\n"
