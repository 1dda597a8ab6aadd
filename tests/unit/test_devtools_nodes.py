# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The harness's edit of a node container's containerd config.toml: config_path lands in the CRI images table, every
other line stays, and a config that configures the registry already is refused (the harness's mirrors would not apply)."""

import difflib
import os
import tomllib

import pytest

from devtools.nodes import CERTS_D, with_config_path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V2 = 'plugins."io.containerd.grpc.v1.cri"'
V3 = 'plugins."io.containerd.cri.v1.images"'


@pytest.mark.parametrize("name, section, keys", [
    ("containerd-config.toml", V2, ["plugins", "io.containerd.grpc.v1.cri"]),
    ("containerd-config-v3.toml", V3, ["plugins", "io.containerd.cri.v1.images"]),
])
def test_config_path_added_to_the_node_images_config(name, section, keys):
    with open(os.path.join(REPO, "tests", "node-image", name), encoding="utf-8") as f:
        text = f.read()
    edited = with_config_path(text, section)
    data, before = tomllib.loads(edited), tomllib.loads(text)
    table = data
    for key in keys:
        table = table[key]
    assert table.pop("registry") == {"config_path": CERTS_D}
    assert data == before  # nothing else changed
    diff = list(difflib.ndiff(text.splitlines(), edited.splitlines()))
    assert not [d for d in diff if d.startswith("- ")]  # every line kept, in order
    assert [d[2:].strip() for d in diff if d.startswith("+ ") and d[2:].strip()][1:] == ["[%s.registry]" % section, 'config_path = "%s"' % CERTS_D]


def test_config_path_goes_with_its_section_not_at_the_end():
    text = '[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "overlayfs"\n\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_selinux = false\n'
    edited = with_config_path(text, V3)
    assert edited.index("cri.v1.images\".registry]") < edited.index("[plugins.\"io.containerd.cri.v1.runtime\"]")


@pytest.mark.parametrize("text", [
    '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/elsewhere"\n',
    '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n  endpoint = ["https://mirror"]\n',
    '[grpc]\n  address = "/run/containerd/containerd.sock"\n',
])
def test_config_path_refused_when_it_would_not_apply(text):
    with pytest.raises(RuntimeError, match="registry|no \\["):
        with_config_path(text, V2)
