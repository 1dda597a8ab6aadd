# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.runtime_config on files in tmp_path, and its runtime findings against every real runtime."""

import os
import re
import subprocess

import pytest

from tests.integration.conftest import read_only_tmpfs
from tests.integration.expectations import rpc_calls

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
        config_version=2, root="/data/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="registry.k8s.io/pause:3.9"
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
        config_version=1, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="k8s.gcr.io/pause:3.2"
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
    write(dropins / "README", "[not toml")  # not *.conf: ignored
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


def config_args(runtime, tmp_path, **replace):
    """runtime_config arguments for a copy of the runtime's own config files, with ``replace``
    (root, sandbox_image, imagestore) applied where this runtime keeps them."""
    if runtime.kind == "containerd":
        keys = {"root": "root", "sandbox_image": "sandbox_image" if runtime.major < 2 else "sandbox"}
        path = _copy(runtime.config_path, tmp_path / "config.toml", {keys[k]: v for k, v in replace.items()})
        return {"runtime": "containerd", "path": path}
    # CRI-O: crio.conf's [crio] overrides storage.conf, so a path changes in both
    crio_keys = {"root": "root", "sandbox_image": "pause_image", "imagestore": "imagestore"}
    storage_keys = {"root": "graphroot", "imagestore": "imagestore"}
    crio = _copy(runtime.config_path, tmp_path / "crio.conf", {crio_keys[k]: v for k, v in replace.items()})
    storage = _copy(runtime.storage_conf, tmp_path / "storage.conf", {storage_keys[k]: v for k, v in replace.items() if k in storage_keys})
    return {"runtime": "crio", "path": crio, "storage_path": storage, "dropin_dir": runtime.dropin_dir}


def test_runtime_findings_against_the_running_runtime(ansible, runtime, tmp_path, interpreter):
    crio = runtime.kind == "cri-o"
    root_key, image_key = ("graphroot", "pause_image") if crio else ("root", "sandbox_image")
    query = {"cri_endpoint": runtime.endpoint, "query_runtime": True}
    # its own config: root (and imagestore) on the filesystems it reports, same sandbox image
    res = ok(run(ansible, dict(config_args(runtime, tmp_path), **query), interpreter))
    assert res["changed"] is False and res["current"][root_key] == runtime.root
    if crio:
        assert res["current"]["imagestore"] == runtime.imagestore
    assert res["rpc_calls"] == rpc_calls(runtime, {"Version": 1, "Status": 1, "ImageFsInfo": 1}, pods=False)
    assert res["findings"] == []

    # root elsewhere (tmp_path is on no tmpfs of the runtime), as the file says and as a change
    assert os.stat(str(tmp_path)).st_dev != os.stat(runtime.imagefs_mountpoint).st_dev
    res = ok(run(ansible, dict(config_args(runtime, tmp_path, root=str(tmp_path / "root")), **query), interpreter))
    assert codes(res) == ["root_not_on_imagefs"]
    # with cri-o's imagestore, graphroot holds the containers: it belongs on the container filesystem
    kind, mount = ("container", runtime.containerfs_mountpoint) if crio else ("image", runtime.imagefs_mountpoint)
    assert res["findings"][0]["message"] == "%s %s is not on the filesystem of the %s filesystem %s that the runtime at %s reports." % (
        root_key,
        tmp_path / "root",
        kind,
        mount,
        runtime.endpoint,
    )
    args = dict(config_args(runtime, tmp_path), settings={root_key: str(tmp_path / "new")}, **query)
    res = ok(run(ansible, args, interpreter))
    assert res["changed"] is True and codes(res) == ["root_not_on_imagefs"]
    assert res["findings"][0]["message"].endswith(" (a restart applies the new value).")
    if crio:
        res = ok(run(ansible, dict(config_args(runtime, tmp_path, imagestore=str(tmp_path / "store")), **query), interpreter))
        assert [f["message"] for f in res["findings"]] == [
            "imagestore %s is not on the filesystem of the image filesystem %s that the runtime at %s reports."
            % (tmp_path / "store", runtime.imagefs_mountpoint, runtime.endpoint)
        ]

    # another sandbox image
    res = ok(run(ansible, dict(config_args(runtime, tmp_path, sandbox_image="registry.k8s.io/pause:3.10"), **query), interpreter))
    assert codes(res) == ["sandbox_image_mismatch"]
    assert res["findings"][0]["message"] == "The config sets %s registry.k8s.io/pause:3.10 but the runtime at %s uses %s." % (
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
        r"^Unknown settings key graphroot for runtime containerd; the supported keys are root, state, snapshotter, sandbox_image, pinned_images\.$",
    ),
    "pins_on_version_2": (
        "containerd",
        V2,
        {"pinned_images": ["registry.example/app:1"]},
        r"^settings\.pinned_images needs a version 3 config \(containerd 2\.x\); (?P<path>\S+) is a version 2 config, in which containerd pins only its sandbox image\.$",
    ),
    "pins_not_references": ("containerd", V3, {"pinned_images": ["Bad Name"]}, r"^settings\.pinned_images must hold image references such as .*, got 'Bad Name'\.$"),
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
