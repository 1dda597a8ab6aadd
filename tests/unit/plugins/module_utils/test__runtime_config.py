# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import http.server
import json
import socketserver
import threading

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.config import _findings
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config_policy as rc
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _crio_api

P = "/etc/containerd/config.toml"

V1 = """# an old config
root = "/srv/containerd"
[plugins.cri]
  sandbox_image = "k8s.gcr.io/pause:3.2"
  [plugins.cri.containerd]
    snapshotter = "native"
"""

V2 = """# managed by hand
version = 2
root = "/var/lib/containerd"   # the default
disabled_plugins = []

[grpc]
  address = "/run/containerd/containerd.sock"

# CRI plugin
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"   # pinned
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

[metrics]
  address = ""
"""

V3 = """version = 3
root = '/var/lib/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'   # default

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false

# the end
"""


def containerd(text, settings=None, path=P, imports=()):
    return rc.plan_containerd(text, path, settings, imports)


# -- reading ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (V1, dict(config_version=1, root="/srv/containerd", state="/run/containerd", snapshotter="native", sandbox_image="k8s.gcr.io/pause:3.2",
                  discard_unpacked_layers=False)),
        (V2, dict(config_version=2, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="registry.k8s.io/pause:3.6",
                  discard_unpacked_layers=False)),
        (
            V3 + "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n",
            dict(config_version=3, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image="registry.k8s.io/pause:3.10",
                 pinned_images=[], discard_unpacked_layers=False),
        ),
        ("", dict(config_version=None, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image=None,
                  discard_unpacked_layers=False)),
        (None, dict(config_version=None, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image=None,
                    discard_unpacked_layers=False)),
        ("# only a comment\n", dict(config_version=None, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs",
                                    sandbox_image=None, discard_unpacked_layers=False)),
    ],
)
def test_containerd_read(text, expected):
    plan = containerd(text)
    assert plan["current"] == expected
    assert plan["after"] is None


def test_version_1_is_read_with_a_finding_but_not_written():
    plan = containerd(V1, {"root": "/srv/containerd/"})  # same path: nothing to write
    assert plan["after"] is None
    assert [f["code"] for f in plan["findings"]] == ["config_version_1"]
    with pytest.raises(rc.ConfigError, match=r"^/etc/containerd/config.toml is a version 1 config, .*'containerd config migrate' first\.$"):
        containerd(V1, {"root": "/data"})


def test_unknown_version():
    with pytest.raises(rc.ConfigError, match=r"has config version 5; only versions 1 to 4 are known\.$"):
        containerd("version = 5\n")


@pytest.mark.parametrize(
    "text, message",
    [
        ("version = 2\nroot = \n", r"^/etc/containerd/config.toml is not valid TOML at line 2, column 8: Invalid value\.$"),
        (
            "version = 2\n[grpc]\n  a = 1\n[grpc]\n  b = 2\n",
            r"^/etc/containerd/config.toml is not valid TOML at line 4, column 6: Cannot declare \('grpc',\) twice\.$",
        ),
        ("[a]\nb.c = 1\n[a.b]\nd = 1\n", r"^/etc/containerd/config.toml is not valid TOML at line 3, column 5: Cannot declare \('a', 'b'\) twice\.$"),
        ('x = "unterminated\n', r"^/etc/containerd/config.toml is not valid TOML at line 1, column 18: Illegal character '\\n'\.$"),
    ],
)
def test_parse_errors_name_file_and_line(text, message):
    with pytest.raises(rc.ConfigError, match=message):
        containerd(text, {"root": "/data"})


# -- writing containerd ------------------------------------------------------------


def test_v2_edit_keeps_everything_else():
    plan = containerd(V2, {"root": "/data/containerd/", "state": "/run/ctrd", "snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.9"})
    assert plan["after"] == ("""# managed by hand
version = 2
root = "/data/containerd"   # the default
disabled_plugins = []
state = "/run/ctrd"

[grpc]
  address = "/run/containerd/containerd.sock"

# CRI plugin
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"   # pinned
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "zfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

[metrics]
  address = ""
""")
    assert plan["current"] == dict(discard_unpacked_layers=False, config_version=2, root="/data/containerd", state="/run/ctrd", snapshotter="zfs",
                                   sandbox_image="registry.k8s.io/pause:3.9")
    # idempotent: the result needs nothing more
    assert (
        containerd(plan["after"], {"root": "/data/containerd", "state": "/run/ctrd/", "snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.9"})[
            "after"
        ]
        is None
    )


def test_v2_creates_missing_tables_in_the_file_style():
    text = """version = 2

[grpc]
  address = "/run/containerd/containerd.sock"

# metrics follow
[metrics]
  address = ""
"""
    after = containerd(text, {"sandbox_image": "registry.k8s.io/pause:3.9", "snapshotter": "zfs"})["after"]
    assert after == ("""version = 2

[grpc]
  address = "/run/containerd/containerd.sock"

# metrics follow
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "zfs"
""")


def test_v2_adds_a_table_inside_its_parent_before_the_next_tables_comment():
    text = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"

# metrics
[metrics]
  address = ""
"""
    after = containerd(text, {"snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.9"})["after"]
    assert after == ("""version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_selinux = false
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "zfs"

# metrics
[metrics]
  address = ""
""")


def test_v3_edit_keeps_quotes_and_creates_pinned_images():
    plan = containerd(V3, {"root": "/data/containerd", "snapshotter": "native", "sandbox_image": "registry.k8s.io/pause:3.10"})
    assert plan["after"] == ("""version = 3
root = '/data/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'native'   # default

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false

# the end
""")
    assert plan["current"]["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert containerd(plan["after"], {"root": "/data/containerd", "snapshotter": "native", "sandbox_image": "registry.k8s.io/pause:3.10"})["after"] is None


def test_v3_gives_a_table_known_only_from_its_sub_table_a_header():
    text = "version = 3\n\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n"
    after = containerd(text, {"snapshotter": "native"})["after"]
    assert after == (
        "version = 3\n\n"
        "[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'native'\n\n"
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n"
    )


def test_empty_file_gets_version_2_and_content_may_say_3():
    assert containerd("", {"root": "/data", "sandbox_image": "registry.k8s.io/pause:3.9"})["after"] == (
        'version = 2\nroot = "/data"\n\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "registry.k8s.io/pause:3.9"\n'
    )
    plan = containerd("version = 3\n", {"snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.10"})
    assert plan["after"] == (
        "version = 3\n\n[plugins.'io.containerd.cri.v1.images']\nsnapshotter = 'zfs'\n\n"
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = 'registry.k8s.io/pause:3.10'\n"
    )
    assert plan["current"]["config_version"] == 3


V3_PINNED = """version = 3

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10'   # the pause image
  base = 'docker.io/library/ubuntu:24.04'
  'kubenode-gc/registry.example/old:1' = 'registry.example/old:1'
"""


def test_v3_pinned_images_are_ours_by_key_and_exactly_the_list():
    plan = containerd(V3_PINNED, {"pinned_images": ["busybox", "registry.example/app:2", "registry.example/app:2"]})
    assert plan["after"] == (
        "version = 3\n\n"
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n"
        "  sandbox = 'registry.k8s.io/pause:3.10'   # the pause image\n"
        "  base = 'docker.io/library/ubuntu:24.04'\n"
        "  'kubenode-gc/docker.io/library/busybox:latest' = 'docker.io/library/busybox:latest'\n"
        "  'kubenode-gc/registry.example/app:2' = 'registry.example/app:2'\n"
    )
    assert plan["current"]["pinned_images"] == ["docker.io/library/busybox:latest", "registry.example/app:2"]
    assert plan["current"]["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert containerd(plan["after"], {"pinned_images": ["docker.io/library/busybox:latest", "registry.example/app:2"]})["after"] is None
    assert containerd(V3_PINNED)["current"]["pinned_images"] == ["registry.example/old:1"]
    # [] removes only our entries; null leaves them
    emptied = containerd(plan["after"], {"pinned_images": []})["after"]
    assert emptied == "version = 3\n\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n" \
        "  sandbox = 'registry.k8s.io/pause:3.10'   # the pause image\n  base = 'docker.io/library/ubuntu:24.04'\n"
    assert containerd(plan["after"], {"pinned_images": None})["after"] is None


def test_v3_pinned_images_table_is_created():
    after = containerd("version = 3\n", {"pinned_images": ["registry.example/app:2"]})["after"]
    assert after == "version = 3\n\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n'kubenode-gc/registry.example/app:2' = 'registry.example/app:2'\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (V2, r"^settings.pinned_images needs a version 3 config \(containerd 2.x\); /etc/containerd/config.toml is a version 2 config, "
             r"in which containerd pins only its sandbox image\.$"),
        ("", r"^settings.pinned_images needs a version 3 config \(containerd 2.x\); /etc/containerd/config.toml has no version key\.$"),
    ],
)
def test_pinned_images_need_version_3(text, message):
    with pytest.raises(rc.ConfigError, match=message):
        containerd(text, {"pinned_images": ["registry.example/app:2"]})
    assert containerd(text, {"pinned_images": []})["after"] is None


def test_missing_file_without_content_fails_only_when_it_must_change():
    assert containerd(None, {})["after"] is None
    with pytest.raises(rc.ConfigError, match=r"^/etc/containerd/config.toml does not exist; set content to create it\.$"):
        containerd(None, {"root": "/data"})


def test_dotted_and_inline_tables():
    dotted = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  containerd.snapshotter = "a"\n'
    assert containerd(dotted, {"snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.9"})["after"] == (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  containerd.snapshotter = "zfs"\n  sandbox_image = "registry.k8s.io/pause:3.9"\n'
    )
    inline = 'version = 2\n[plugins]\n  "io.containerd.grpc.v1.cri" = { enable_selinux = false }\n'
    with pytest.raises(rc.ConfigError, match=r"^Cannot add plugins.io.containerd.grpc.v1.cri.sandbox_image to /etc/containerd/config.toml: .* by hand\.$"):
        containerd(inline, {"sandbox_image": "registry.k8s.io/pause:3.9"})


def test_out_of_order_tables_are_edited_where_they_are():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  a = 1\n[grpc]\n  b = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  c = 3\n'
    assert containerd(text, {"snapshotter": "zfs", "sandbox_image": "registry.k8s.io/pause:3.9"})["after"] == (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  a = 1\n  snapshotter = "zfs"\n[grpc]\n  b = 2\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n  c = 3\n  sandbox_image = "registry.k8s.io/pause:3.9"\n'
    )


def test_file_without_final_newline():
    assert containerd('version = 2\nroot = "/a"', {"root": "/b"})["after"] == 'version = 2\nroot = "/b"\n'


# -- settings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "runtime, settings, message",
    [
        (
            "containerd",
            {"graphroot": "/x"},
            r"^Unknown settings key graphroot for runtime containerd; the supported keys are root, state, snapshotter, sandbox_image, "
            r"discard_unpacked_layers, pinned_images\.$",
        ),
        (
            "crio",
            {"root": "/x", "zz": 1},
            r"^Unknown settings keys root, zz for runtime crio; the supported keys are graphroot, runroot, imagestore, driver, pause_image\.$",
        ),
        ("containerd", {"root": "var/lib/containerd"}, r"^settings.root must be an absolute path, got 'var/lib/containerd'\.$"),
        ("containerd", {"state": "/"}, r"^settings.state must be a directory below /, not / itself\.$"),
        ("containerd", {"root": 5}, r"^settings.root must be a string, got 5\.$"),
        ("containerd", {"snapshotter": "Over Lay"}, r"^settings.snapshotter must be a snapshotter name"),
        ("containerd", {"snapshotter": ""}, r"^settings.snapshotter must be a snapshotter name"),
        ("containerd", {"sandbox_image": "Registry.k8s.io/Pause"}, r"^settings.sandbox_image must be an image reference"),
        ("crio", {"pause_image": "pause:"}, r"^settings.pause_image must be an image reference"),
        ("containerd", {"pinned_images": "busybox"}, r"^settings.pinned_images must be a list of image references, got 'busybox'\.$"),
        ("containerd", {"pinned_images": ["busybox", "Bad Name"]}, r"^settings.pinned_images must hold image references such as .*, got 'Bad Name'\.$"),
        ("containerd", {"pinned_images": ["sha256:" + "a" * 64]}, r"^settings.pinned_images must hold image references"),
        ("crio", {"pinned_images": ["busybox"]}, r"^Unknown settings key pinned_images for runtime crio"),
        ("crio", {"driver": "overlay2"}, r"^settings.driver must be one of overlay, vfs, btrfs, zfs, devmapper, aufs, got 'overlay2'\.$"),
    ],
)
def test_bad_settings(runtime, settings, message):
    with pytest.raises(rc.ConfigError, match=message):
        rc.check_settings(runtime, settings)


@pytest.mark.parametrize(
    "ref",
    ["pause", "registry.k8s.io/pause:3.9", "localhost:5000/a/b_c:v1.2-3", "quay.io/x/y@sha256:" + "a" * 64, "[::1]:5000/pause:1", "docker.io/library/a__b"],
)
def test_image_references(ref):
    assert rc.check_settings("containerd", {"sandbox_image": ref}) == {"sandbox_image": ref}


def test_settings_are_normalised_and_nulls_skipped():
    assert rc.check_settings("crio", {"graphroot": "/data//storage/", "pause_image": None}) == {"graphroot": "/data/storage"}


# -- CRI-O -----------------------------------------------------------------------------

STORAGE = """# containers-storage
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"

[storage.options.overlay]
mountopt = "nodev"
"""

CRIO = """[crio]
# root overrides storage.conf
root = "/var/lib/containers/storage"
log_dir = "/var/log/crio/pods"

[crio.api]
listen = "/var/run/crio/crio.sock"
"""


def crio(storage=STORAGE, conf=CRIO, dropins=(), settings=None):
    return rc.plan_crio(("/etc/containers/storage.conf", storage), ("/etc/crio/crio.conf", conf), list(dropins), settings)


def test_crio_read_effective_values():
    plan = crio(dropins=[("/etc/crio/crio.conf.d/10-a.conf", '[crio.image]\npause_image = "registry.k8s.io/pause:3.9"\n')])
    assert plan["after"] == dict(storage=None, crio=None)
    assert plan["current"] == dict(
        graphroot="/var/lib/containers/storage", runroot="/run/containers/storage", imagestore=None, driver="overlay", pause_image="registry.k8s.io/pause:3.9"
    )
    assert plan["findings"] == []


def test_crio_edits_storage_conf_and_the_explicit_crio_keys():
    plan = crio(
        settings={"graphroot": "/data/storage", "runroot": "/run/containers/storage/", "driver": "overlay", "pause_image": "registry.k8s.io/pause:3.10"}
    )
    assert plan["after"]["storage"] == STORAGE.replace('graphroot = "/var/lib/containers/storage"', 'graphroot = "/data/storage"')
    assert plan["after"]["crio"] == ("""[crio]
# root overrides storage.conf
root = "/data/storage"
log_dir = "/var/log/crio/pods"

[crio.api]
listen = "/var/run/crio/crio.sock"

[crio.image]
pause_image = "registry.k8s.io/pause:3.10"
""")
    assert plan["current"]["graphroot"] == "/data/storage" and plan["current"]["pause_image"] == "registry.k8s.io/pause:3.10"
    assert plan["findings"] == []
    again = crio(plan["after"]["storage"], plan["after"]["crio"], settings={"graphroot": "/data/storage", "pause_image": "registry.k8s.io/pause:3.10"})
    assert again["after"] == dict(storage=None, crio=None)


def test_crio_creates_the_storage_table():
    plan = crio(storage="", conf=None, settings={"graphroot": "/data/storage", "driver": "overlay"})
    assert plan["after"] == dict(storage='[storage]\ngraphroot = "/data/storage"\ndriver = "overlay"\n', crio=None)


def test_crio_missing_files_fail_only_when_they_must_change():
    assert crio(storage=None, conf=None)["current"]["graphroot"] == "/var/lib/containers/storage"
    with pytest.raises(rc.ConfigError, match=r"^/etc/containers/storage.conf does not exist; set storage_content to create it\.$"):
        crio(storage=None, settings={"runroot": "/run/x"})
    with pytest.raises(rc.ConfigError, match=r"^/etc/crio/crio.conf does not exist; set content to create it\.$"):
        crio(conf=None, settings={"pause_image": "registry.k8s.io/pause:3.10"})


def test_crio_mismatch_and_dropin_findings():
    dropins = [
        ("/etc/crio/crio.conf.d/10-storage.conf", '[crio]\nrunroot = "/run/other"\nstorage_driver = "overlay"\n'),
        ("/etc/crio/crio.conf.d/20-image.conf", '[crio.image]\npause_image = "registry.k8s.io/pause:3.6"\n'),
        ("/etc/crio/crio.conf.d/30-driver.conf", '[crio]\nstorage_driver = "vfs"\n'),
    ]
    plan = crio(dropins=dropins, settings={"pause_image": "registry.k8s.io/pause:3.10", "runroot": "/run/containers/storage"})
    assert plan["current"]["runroot"] == "/run/other"
    assert plan["current"]["driver"] == "vfs"
    assert plan["current"]["pause_image"] == "registry.k8s.io/pause:3.6"
    findings = _findings.sort_findings(plan["findings"])
    assert [(f["severity"], f["code"]) for f in findings] == [
        ("warning", "crio_runroot_mismatch"),
        ("warning", "crio_storage_driver_mismatch"),
        ("warning", "dropin_overrides"),
        ("warning", "dropin_overrides"),
    ]
    assert findings[0]["message"] == (
        "[crio] runroot '/run/other' in /etc/crio/crio.conf.d/10-storage.conf differs from runroot '/run/containers/storage' in "
        "/etc/containers/storage.conf: CRI-O uses '/run/other', other containers/storage tools use '/run/containers/storage'."
    )
    assert findings[2]["message"] == (
        "The drop-in /etc/crio/crio.conf.d/10-storage.conf sets [crio] runroot = '/run/other', which overrides the runroot "
        "'/run/containers/storage' requested here (drop-ins are not edited)."
    )


def test_dropin_overriding_crio_conf_is_reported_read_only():
    dropins = [("/etc/crio/crio.conf.d/20-site.conf", '[crio.image]\npause_image = "registry.k8s.io/pause:3.9"\n')]
    plan = crio(conf='[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n', dropins=dropins)
    assert plan["current"]["pause_image"] == "registry.k8s.io/pause:3.9"
    (override,) = plan["findings"]
    assert override["code"] == "dropin_overrides"
    assert override["message"].endswith("overrides the pause_image 'registry.k8s.io/pause:3.10' set in /etc/crio/crio.conf (drop-ins are not edited).")


def test_crio_root_mismatch_in_crio_conf():
    plan = crio(conf='[crio]\nroot = "/srv/crio"\n')
    assert [f["code"] for f in plan["findings"]] == ["crio_root_mismatch"]
    assert plan["current"]["graphroot"] == "/srv/crio"


# -- runtime findings, detection, sorting ---------------------------------------------------

DEVICES = {"/var/lib/containerd": 1, "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs": 1, "/data": 2}
IMAGEFS = [{"kind": "image", "mountpoint": "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"}, {"kind": "container", "mountpoint": "/data"}]
INFO = {"name": "containerd", "endpoint": "unix:///run/containerd/containerd.sock", "sandbox_image": "registry.k8s.io/pause:3.9"}


def test_runtime_findings():
    current = dict(root="/var/lib/containerd", sandbox_image="registry.k8s.io/pause:3.9")
    assert rc.runtime_findings("containerd", current, [], INFO, IMAGEFS, DEVICES.get) == []
    moved = rc.runtime_findings("containerd", dict(root="/data", sandbox_image="pause"), ["root"], INFO, IMAGEFS, DEVICES.get)
    assert [f["code"] for f in moved] == ["root_not_on_imagefs", "sandbox_image_mismatch"]
    assert moved[0]["message"] == (
        "root /data is not on the filesystem of the image filesystem /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs "
        "that the runtime at unix:///run/containerd/containerd.sock reports (a restart applies the new value)."
    )
    assert moved[1]["message"] == (
        "The config sets sandbox_image pause but the runtime at unix:///run/containerd/containerd.sock uses registry.k8s.io/pause:3.9."
    )
    same_ref = dict(root="/var/lib/containerd", sandbox_image="busybox")
    assert rc.runtime_findings("containerd", same_ref, [], dict(INFO, sandbox_image="docker.io/library/busybox:latest"), IMAGEFS, DEVICES.get) == []
    other = rc.runtime_findings("crio", {"graphroot": "/data"}, [], INFO, IMAGEFS, DEVICES.get)
    assert [(f["severity"], f["code"]) for f in other] == [("info", "runtime_other")]


def test_runtime_findings_crio_split_imagefs():
    # with an imagestore, images must be on the image filesystem and graphroot on the container filesystem
    devices = {"/var/lib/images": 1, "/var/lib/images/overlay-images": 1, "/var/lib/containers": 2, "/var/lib/containers/overlay-containers": 2, "/data": 3}
    imagefs = [{"kind": "image", "mountpoint": "/var/lib/images/overlay-images"}, {"kind": "container", "mountpoint": "/var/lib/containers/overlay-containers"}]
    info = {"name": "cri-o", "endpoint": "unix:///run/crio/crio.sock", "sandbox_image": "registry.k8s.io/pause:3.10"}
    good = dict(graphroot="/var/lib/containers", imagestore="/var/lib/images", pause_image="registry.k8s.io/pause:3.10")
    assert rc.runtime_findings("crio", good, [], info, imagefs, devices.get) == []
    bad_store = rc.runtime_findings("crio", dict(good, imagestore="/data"), [], info, imagefs, devices.get)
    assert [f["message"] for f in bad_store] == [
        "imagestore /data is not on the filesystem of the image filesystem /var/lib/images/overlay-images that the runtime at "
        "unix:///run/crio/crio.sock reports."
    ]
    bad_root = rc.runtime_findings("crio", dict(good, graphroot="/data"), ["graphroot"], info, imagefs, devices.get)
    assert [f["message"] for f in bad_root] == [
        "graphroot /data is not on the filesystem of the container filesystem /var/lib/containers/overlay-containers that the runtime at "
        "unix:///run/crio/crio.sock reports (a restart applies the new value)."
    ]


# what cri-o 1.37 really answers: its verbose Status info names only the runtime table and the pause image; its
# HTTP API (GET /config on the CRI socket) the whole configuration, as TOML
CRIO_STATUS_INFO = {"config": json.dumps({"crio": {"DefaultRuntime": "runc", "Conmon": "/usr/bin/conmon"}, "sandboxImage": "registry.k8s.io/pause:3.10"})}
CRIO_API_TOML = """[crio]
  root = "/var/lib/containers/storage"
  runroot = "/run/containers/storage"
  imagestore = "/var/lib/images"
  storage_driver = "overlay"
  [crio.image]
    pause_image = "registry.k8s.io/pause:3.10"
"""
CRIO_CURRENT = dict(graphroot="/var/lib/containers/storage", runroot="/run/containers/storage", imagestore="/var/lib/images", driver="overlay",
                    pause_image="registry.k8s.io/pause:3.10")


def test_status_findings_name_both_values():
    endpoint = "unix:///run/crio/crio.sock"
    info = dict(CRIO_STATUS_INFO, **{rc.CRIO_API_CONFIG: CRIO_API_TOML})
    assert rc.status_reported("crio", info) == dict(graphroot="/var/lib/containers/storage", runroot="/run/containers/storage",
                                                    imagestore="/var/lib/images", driver="overlay")
    assert rc.status_findings("crio", CRIO_CURRENT, [], info, endpoint) == []
    assert rc.status_findings("crio", dict(CRIO_CURRENT, graphroot="/var/lib/containers/storage/", driver="overlay2"), [], info, endpoint) == []
    edited = dict(CRIO_CURRENT, graphroot="/data/storage", imagestore=None, driver=None)  # driver None: the files leave it to cri-o
    found = rc.status_findings("crio", edited, ["graphroot"], info, endpoint)
    assert [(f["severity"], f["code"]) for f in found] == [("warning", "daemon_differs_from_files")] * 2
    assert [f["message"] for f in found] == [
        "The runtime at %s reports graphroot /var/lib/containers/storage in its configuration (GET /config), but its files and command "
        "line give /data/storage (a restart applies the new value)." % endpoint,
        "The runtime at %s reports imagestore /var/lib/images in its configuration (GET /config), but its files and command line give none." % endpoint,
    ]
    # no imagestore in cri-o, one in the files
    no_store = dict(info, **{rc.CRIO_API_CONFIG: CRIO_API_TOML.replace('"/var/lib/images"', '""')})
    assert [f["message"] for f in rc.status_findings("crio", CRIO_CURRENT, [], no_store, endpoint)] == [
        "The runtime at %s reports imagestore none in its configuration (GET /config), but its files and command line give /var/lib/images." % endpoint]
    assert rc.status_findings("crio", dict(CRIO_CURRENT, imagestore=None), [], no_store, endpoint) == []
    # the pause image is the sandbox_image_mismatch check's (runtime_findings), from the Status info's sandboxImage
    assert rc.status_findings("crio", dict(CRIO_CURRENT, pause_image="registry.k8s.io/pause:3.9"), [], info, endpoint) == []
    # without its HTTP API's answer, or with one that is not TOML, cri-o says nothing of these settings
    assert rc.status_reported("crio", CRIO_STATUS_INFO) == {} and rc.status_reported("crio", dict(info, **{rc.CRIO_API_CONFIG: "[crio"})) == {}
    # containerd: its Status info, as before
    ctrd = {"config": json.dumps({"containerdRootDir": "/var/lib/containerd", "stateDir": "/run/containerd/io.containerd.grpc.v1.cri"})}
    assert rc.status_reported("containerd", ctrd) == dict(root="/var/lib/containerd", state="/run/containerd")
    assert [f["message"] for f in rc.status_findings("containerd", dict(root="/data", state="/run/containerd"), [], ctrd, "unix:///c.sock")] == [
        "The runtime at unix:///c.sock reports root /var/lib/containerd in its CRI status, but its files and command line give /data."]


class _ApiHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802  pylint: disable=invalid-name
        body = CRIO_API_TOML.encode() if self.path == "/config" else b"no such path"
        self.send_response(200 if self.path == "/config" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self):
        return "unix"

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass


@pytest.fixture
def crio_api(tmp_path):
    """A fake of cri-o's HTTP API on a unix socket, served by a thread."""
    path = str(tmp_path / "crio.sock")
    server = socketserver.ThreadingUnixStreamServer(path, _ApiHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_crio_api_config(crio_api, tmp_path):
    assert _crio_api.config(crio_api, timeout=5) == CRIO_API_TOML
    with pytest.raises(_crio_api.CrioApiError, match=r"^GET /other on .* answered 404 Not Found$"):
        _crio_api.get(crio_api, "/other", timeout=5)
    with pytest.raises(_crio_api.CrioApiError, match=r"^GET /config on .*nothing.sock failed: "):
        _crio_api.config(str(tmp_path / "nothing.sock"), timeout=5)


def test_device_of_uses_the_nearest_existing_parent(tmp_path):
    assert rc.device_of(str(tmp_path / "not" / "there")) == rc.device_of(str(tmp_path))


@pytest.mark.parametrize(
    "existing, crio_options, expected",
    [
        ({P}, [], "containerd"),
        ({rc.STORAGE_PATH}, [], "crio"),
        ({rc.CRIO_PATH}, [], "crio"),
        ({P, rc.STORAGE_PATH}, ["storage_path"], "crio"),
    ],
)
def test_detect_runtime(existing, crio_options, expected):
    assert rc.detect_runtime(None, crio_options, existing.__contains__) == expected


def test_detect_runtime_fails_when_unclear():
    with pytest.raises(rc.ConfigError, match=r"^Both /etc/containerd/config.toml and /etc/containers/storage.conf exist, .*set runtime"):
        rc.detect_runtime(None, [], {P, rc.STORAGE_PATH}.__contains__)
    with pytest.raises(rc.ConfigError, match=r"^None of /x.toml, /etc/containers/storage.conf and /etc/crio/crio.conf exists"):
        rc.detect_runtime("/x.toml", [], set().__contains__)


def test_detect_runtime_prefers_the_running_runtime_and_can_be_lenient():
    assert rc.detect_runtime(None, [], {P}.__contains__, runtime_name="cri-o 1.37") == "crio"
    assert rc.detect_runtime(None, [], set().__contains__, runtime_name="containerd") == "containerd"
    assert rc.detect_runtime(None, [], {P, rc.STORAGE_PATH}.__contains__, strict=False) == "containerd"
    assert rc.detect_runtime(None, [], set().__contains__, strict=False) is None


def test_sort_findings():
    findings = [rc.finding("info", "a", "x"), rc.finding("warning", "z", "y"), rc.finding("warning", "b", "z")]
    assert [f["code"] for f in _findings.sort_findings(findings)] == ["b", "z", "a"]


# -- containerd imports --------------------------------------------------------------


def fake_fs(files):
    """read_text and a glob (sorted fnmatch over the paths) over ``files`` (path -> text)."""
    import fnmatch

    return files.get, lambda pattern: sorted(p for p in files if fnmatch.fnmatchcase(p, pattern))


def load(files, path=P):
    read, glob = fake_fs(files)
    return rc.load_containerd_imports(path, rc.toml_data(files[path], path), read, glob)


def test_imports_are_loaded_breadth_first_once_each_relative_to_the_importer():
    files = {
        P: 'version = 2\nimports = ["b.toml", "conf.d/*.toml", "/etc/containerd/b.toml"]\n',
        "/etc/containerd/b.toml": 'imports = ["../other/nested.toml"]\n',
        "/etc/containerd/conf.d/20-x.toml": 'imports = ["/etc/containerd/config.toml"]\n',  # a loop: loaded once
        "/etc/containerd/conf.d/10-y.toml": "",
        "/etc/containerd/conf.d/.hidden.toml": "",  # Go's '*' matches dot files
        "/etc/other/nested.toml": "",
    }
    assert [p for p, data in load(files)] == [
        "/etc/containerd/b.toml",
        "/etc/containerd/conf.d/.hidden.toml",
        "/etc/containerd/conf.d/10-y.toml",
        "/etc/containerd/conf.d/20-x.toml",
        "/etc/other/nested.toml",
    ]
    assert rc.resolve_import(P, "./d/../x.toml") == ("/etc/containerd/x.toml", False)
    assert rc.resolve_import(P, "/abs/*.toml") == ("/abs/*.toml", True)


def test_a_glob_matching_nothing_adds_nothing_but_a_missing_file_fails():
    assert load({P: 'version = 2\nimports = ["/none/*.toml"]\n'}) == []
    with pytest.raises(rc.ConfigError, match=r"^/etc/containerd/config.toml imports /etc/containerd/gone.toml, which does not exist, so containerd "
                       r"would not start; create it or remove the import\.$"):
        load({P: 'version = 2\nimports = ["gone.toml"]\n'})


def test_bad_imports_fail_naming_the_file():
    with pytest.raises(rc.ConfigError, match=r"^/etc/containerd/bad.toml is not valid TOML at line 1"):
        load({P: 'version = 2\nimports = ["bad.toml"]\n', "/etc/containerd/bad.toml": "[plugins\n"})
    with pytest.raises(rc.ConfigError, match=r"^/etc/containerd/config.toml has imports = 'x.toml'; containerd needs a list of file paths there\.$"):
        load({P: 'version = 2\nimports = "x.toml"\n'})


V2_MAIN = """version = 2
root = "/main/root"
state = "/main/state"
imports = ["conf.d/*.toml"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
"""
MIRRORS = "/etc/containerd/conf.d/50-mirrors.toml"


def test_v2_an_imported_plugin_table_replaces_the_main_files_whole():
    files = {
        P: V2_MAIN,
        MIRRORS: 'version = 2\nroot = ""\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"\n',
    }
    plan = containerd(V2_MAIN, imports=load(files))
    # containerd 1.x: the import's CRI table replaces the main file's, so both keys fall back to the defaults; an empty root does not override
    assert plan["current"] == dict(discard_unpacked_layers=False, root="/main/root", state="/main/state", snapshotter="overlayfs", sandbox_image=None,
                                   config_version=2)
    # and containerd 2.x would drop the main file's snapshotter: its CRI table has no runtimes table
    assert [f["code"] for f in plan["findings"]] == ["import_overrides", "import_overrides", "dropped_by_containerd_2"]
    assert plan["findings"][1]["message"] == (
        "The import /etc/containerd/conf.d/50-mirrors.toml replaces the whole [plugins.'io.containerd.grpc.v1.cri'] table without sandbox_image "
        "(containerd 1.x does not merge plugin tables of imports), which overrides the sandbox_image 'registry.k8s.io/pause:3.10' set in "
        "/etc/containerd/config.toml (containerd uses its default)."
    )
    with pytest.raises(rc.ConfigError, match=r"^The import /etc/containerd/conf.d/50-mirrors.toml replaces the whole .* which overrides the "
                       r"settings.snapshotter 'zfs' for /etc/containerd/config.toml \(containerd uses 'overlayfs'\); nothing was changed, "
                       r"edit or remove that import first\.$"):
        containerd(V2_MAIN, {"snapshotter": "zfs"}, imports=load(files))
    # keys the import does not touch are still edited in the main file
    plan = containerd(V2_MAIN, {"state": "/srv/state"}, imports=load(files))
    assert 'state = "/srv/state"' in plan["after"] and plan["current"]["state"] == "/srv/state"


V3_MAIN = """version = 3
root = '/main/root'
imports = ['/etc/containerd/conf.d/*.toml']
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'native'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10'
"""


def test_v3_imports_merge_key_by_key_and_the_last_wins():
    files = {
        P: V3_MAIN,
        "/etc/containerd/conf.d/10-a.toml": "version = 3\nroot = '/a'\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'zfs'\n",
        "/etc/containerd/conf.d/20-b.toml": "[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'btrfs'\n",
    }
    plan = containerd(V3_MAIN, imports=load(files))
    assert plan["current"] == dict(discard_unpacked_layers=False, root="/a", state="/run/containerd", snapshotter="btrfs",
                                   sandbox_image="registry.k8s.io/pause:3.10", config_version=3, pinned_images=[])
    assert [f["message"] for f in plan["findings"]] == [
        "The import /etc/containerd/conf.d/10-a.toml sets root = '/a', which overrides the root '/main/root' set in /etc/containerd/config.toml "
        "(imports win over the main file).",
        "The import /etc/containerd/conf.d/20-b.toml sets [plugins.'io.containerd.cri.v1.images'] snapshotter = 'btrfs', which overrides the "
        "snapshotter 'native' set in /etc/containerd/config.toml (imports win over the main file).",
    ]
    # a request the imports already satisfy is no conflict; one they contradict is refused
    satisfied = {"snapshotter": "btrfs", "sandbox_image": "registry.k8s.io/pause:3.10"}
    assert containerd(V3_MAIN, satisfied, imports=load(files))["current"]["snapshotter"] == "btrfs"
    with pytest.raises(rc.ConfigError, match=r"^The import /etc/containerd/conf.d/20-b.toml sets .* snapshotter = 'btrfs', which overrides the "
                       r"settings.snapshotter 'overlayfs' for /etc/containerd/config.toml \(imports win over the main file\); nothing was changed"):
        containerd(V3_MAIN, {"snapshotter": "overlayfs"}, imports=load(files))


def test_go_glob_matches_as_containerd_does(tmp_path):
    from ansible_collections.kubenode.gc.plugins.module_utils.config._runtime_config import go_glob

    for name in ("b.toml", "a.toml", ".c.toml", "d.conf"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub1").mkdir()
    (tmp_path / "sub1" / "x.toml").write_text("")
    assert go_glob(str(tmp_path / "*.toml")) == [str(tmp_path / n) for n in (".c.toml", "a.toml", "b.toml")]
    assert go_glob(str(tmp_path / "sub*" / "*.toml")) == [str(tmp_path / "sub1" / "x.toml")]
    assert go_glob(str(tmp_path / "none" / "*.toml")) == []


# -- discard_unpacked_layers (issue 42) ------------------------------------------------------------------------------

V2_NO_RUNTIMES = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
"""
V2_RUNTIMES = V2_NO_RUNTIMES + """    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
"""


def test_discard_unpacked_layers_goes_where_each_config_version_reads_it():
    on = {"discard_unpacked_layers": True}
    # version 2 with a runtimes table: the CRI plugin's containerd table, which containerd 2.x migrates too
    plan = containerd(V2_RUNTIMES, on)
    runc = '    default_runtime_name = "runc"\n'
    assert plan["after"] == V2_RUNTIMES.replace(runc, runc + '    discard_unpacked_layers = true\n')
    assert plan["current"]["discard_unpacked_layers"] is True and plan["findings"] == []
    # without one containerd 2.x drops it from there: also [plugins."io.containerd.cri.v1.images"], which 2.x reads
    plan = containerd(V2_NO_RUNTIMES, on)
    assert plan["after"] == (V2_NO_RUNTIMES + '    discard_unpacked_layers = true\n\n[plugins."io.containerd.cri.v1.images"]\n'
                             '  discard_unpacked_layers = true\n')
    assert plan["findings"] == [] and plan["current"]["discard_unpacked_layers"] is True
    assert containerd(plan["after"], on)["after"] is None  # a second run changes nothing
    off = containerd(plan["after"], {"discard_unpacked_layers": False})
    assert off["after"].count("discard_unpacked_layers = false") == 2 and off["current"]["discard_unpacked_layers"] is False
    # version 3 (and 4): the CRI images plugin
    plan = containerd("version = 3\n", on)
    assert plan["after"] == "version = 3\n\n[plugins.'io.containerd.cri.v1.images']\ndiscard_unpacked_layers = true\n"
    assert containerd("version = 4\n", on)["after"] == plan["after"].replace("version = 3", "version = 4")
    assert containerd("version = 3\n")["current"]["discard_unpacked_layers"] is False


def test_a_version_2_key_containerd_2_drops_is_a_finding():
    text = V2_NO_RUNTIMES.replace('    default_runtime_name = "runc"\n', '    snapshotter = "native"\n    discard_unpacked_layers = true\n')
    found = containerd(text)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("dropped_by_containerd_2", "info")] * 2
    assert found[0]["message"] == (
        "/etc/containerd/config.toml sets snapshotter = 'native' in [plugins.'io.containerd.grpc.v1.cri'.containerd], which has no "
        "runtimes table, so containerd 2.x drops it when it migrates this version 2 file and uses 'overlayfs'; set it in "
        "[plugins.'io.containerd.cri.v1.images'] too, or migrate the file to version 3 (containerd config migrate).")
    assert "discard_unpacked_layers = true" in found[1]["message"] and "uses false" in found[1]["message"]
    # with the same value where 2.x reads it, or a runtimes table, or in version 3: nothing to say
    fixed = text + '[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "native"\n  discard_unpacked_layers = true\n'
    assert containerd(fixed)["findings"] == []
    assert containerd(V2_RUNTIMES.replace('    default_runtime_name = "runc"\n', '    snapshotter = "native"\n'))["findings"] == []
    # the value 2.x uses anyway (its default) is nothing to say either
    same = V2_NO_RUNTIMES.replace('    default_runtime_name = "runc"\n', '    snapshotter = "overlayfs"\n    discard_unpacked_layers = false\n')
    assert containerd(same)["findings"] == []


@pytest.mark.parametrize("value", ["true", 1, None])
def test_discard_unpacked_layers_must_be_a_boolean(value):
    if value is None:
        assert containerd(V2_RUNTIMES, {"discard_unpacked_layers": None})["after"] is None  # null leaves it alone
        return
    with pytest.raises(rc.ConfigError, match=r"^settings\.discard_unpacked_layers must be true or false, got %s\.$" % repr(value)):
        containerd(V2_RUNTIMES, {"discard_unpacked_layers": value})


def test_containerd_1_reports_discard_unpacked_layers_in_its_status():
    info = {"config": json.dumps({"containerRootDir": "", "containerd": {"snapshotter": "overlayfs", "discardUnpackedLayers": True}})}
    assert rc.status_reported("containerd", info) == {"discard_unpacked_layers": True}
    current = dict(root="/var/lib/containerd", discard_unpacked_layers=False)
    found = rc.status_findings("containerd", current, ["discard_unpacked_layers"], info, "unix:///c.sock")
    assert [f["message"] for f in found] == [
        "The runtime at unix:///c.sock reports discard_unpacked_layers true in its CRI status, but its files give false (a restart applies the "
        "new value)."]
    assert rc.status_findings("containerd", dict(current, discard_unpacked_layers=True), [], info, "unix:///c.sock") == []
