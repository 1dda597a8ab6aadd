# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The CRI plugin's container metadata in containerd's records: the log path, or None whenever the CRI must be asked.

SAMPLE is the value of the io.cri-containerd.container.metadata extension as containerd 1.6.20, 1.7.24 and 2.1.9 wrote
it (the same format in all three; only the temporary directory is replaced by /var/log/pods)."""

import json

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _cri_metadata as meta

CID = "931c6390baf0c81b27427f5e8bcfb4c268a8244ffdcdbedb384e982817a52282"
LOG = "/var/log/pods/probe-ns_probe_uid-probe-ns-probe/c1/0.log"
SAMPLE = (
    '{"Version":"v1","Metadata":{"ID":"931c6390baf0c81b27427f5e8bcfb4c268a8244ffdcdbedb384e982817a52282",'
    '"Name":"c1_probe_probe-ns_uid-probe-ns-probe_0","SandboxID":"15556a01e17aa3ef315b3f7647d4243b9c1c2a4d3c2c4509396aab6c0a807076",'
    '"Config":{"metadata":{"name":"c1"},"image":{"image":"registry.k8s.io/probe:1"},"command":["/bin/sleep","2147483647"],'
    '"labels":{"io.kubernetes.container.name":"c1","io.kubernetes.pod.name":"probe","io.kubernetes.pod.namespace":"probe-ns",'
    '"io.kubernetes.pod.uid":"uid-probe-ns-probe"},"log_path":"c1/0.log","linux":{"security_context":{"namespace_options":{"network":2}}}},'
    '"ImageRef":"sha256:e8f7fb37e3f55c9d25d612cf82253b4bf5d697c4b2f0da2355b432c18fa3dac0",'
    '"LogPath":"/var/log/pods/probe-ns_probe_uid-probe-ns-probe/c1/0.log","StopSignal":"","ProcessLabel":""}}'
)
# the sandbox's own record carries io.cri-containerd.sandbox.metadata instead, which has no LogPath
SANDBOX_SAMPLE = (
    '{"Version":"v1","Metadata":{"ID":"15556a01e17aa3ef315b3f7647d4243b9c1c2a4d3c2c4509396aab6c0a807076",'
    '"Name":"probe_probe-ns_uid-probe-ns-probe_0","Config":{"metadata":{"name":"probe","uid":"uid-probe-ns-probe","namespace":"probe-ns"},'
    '"log_directory":"/var/log/pods/probe-ns_probe_uid-probe-ns-probe"},"NetNSPath":"","IP":"","AdditionalIPs":null,'
    '"RuntimeHandler":"","CNIResult":null,"ProcessLabel":""}}'
)


def _with(**changes):
    doc = json.loads(SAMPLE)
    for key, value in changes.items():
        if value is KeyError:
            del doc["Metadata"][key]
        else:
            doc["Metadata"][key] = value
    return json.dumps(doc).encode()


def test_the_log_path_of_a_real_record():
    assert meta.CONTAINER_METADATA == "io.cri-containerd.container.metadata"
    assert meta.container_log_path(SAMPLE.encode(), CID) == LOG
    assert meta.container_log_path(SAMPLE, CID) == LOG  # str too
    assert meta.container_log_path(SAMPLE.encode()) == LOG  # without an id to check


@pytest.mark.parametrize("value", [
    None,  # no extension: ctr or nerdctl made the container
    b"",
    b"not json",
    SAMPLE.encode()[:200],  # truncated
    b"\xff\xfe{}",  # not UTF-8
    b"[]",
    b"42",
    b"null",
    b'"/var/log/pods/x/0.log"',
    json.dumps({"Metadata": json.loads(SAMPLE)["Metadata"]}).encode(),  # no version
    json.dumps(dict(json.loads(SAMPLE), Version="v2")).encode(),  # a version we do not know
    json.dumps({"Version": "v1"}).encode(),
    json.dumps({"Version": "v1", "Metadata": None}).encode(),
    json.dumps({"Version": "v1", "Metadata": [LOG]}).encode(),
    _with(LogPath=""),  # the pod has no log directory (the CRI says the same)
    _with(LogPath=KeyError),
    _with(LogPath=None),
    _with(LogPath=17),
    _with(LogPath=["/var/log/pods/a/0.log"]),
    _with(LogPath="c1/0.log"),  # relative
    _with(LogPath="/var/log/pods/a\x00b/0.log"),
    SANDBOX_SAMPLE.encode(),
])
def test_anything_else_gives_none(value):
    assert meta.container_log_path(value, CID) is None


def test_another_containers_metadata_gives_none():
    assert meta.container_log_path(SAMPLE.encode(), "0" * 64) is None
    assert meta.container_log_path(_with(ID=KeyError), CID) is None
    assert meta.container_log_path(_with(ID=KeyError)) == LOG


def _ns(*containers):
    return {"containers": [{"id": cid, "image": "", "snapshotter": "overlayfs", "snapshot_key": cid, "labels": {}, "cri_metadata": value}
                           for cid, value in containers]}


def test_log_paths_of_an_inventory():
    other = "/var/log/pods/ns_other_u/c/0.log"
    inventory = {
        "k8s.io": _ns((CID, SAMPLE.encode()), ("sandbox", None), ("broken", b"{"), ("twice", _with(ID="twice", LogPath=other)),
                      ("same", _with(ID="same"))),
        # the same id in another namespace: agreeing records keep the path, disagreeing ones leave it to the CRI
        "moby": _ns(("twice", _with(ID="twice")), ("same", _with(ID="same")), ("ctr-made", None)),
        "default": {"containers": []},
    }
    assert meta.log_paths(inventory) == {CID: LOG, "same": LOG}
    assert meta.log_paths({}) == {}
