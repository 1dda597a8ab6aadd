# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os
import socket
import subprocess
import sys

import grpc
import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri_api_pb2 as pb

# Runs in a new interpreter: imports _cri (as root, from this test run's sys.path), becomes nobody,
# calls _cri.<function>(*args, **kwargs) and prints {"result": ...} or {"error": the CriError's text}.
_AS_NOBODY = """
import json, os, sys
sys.path[:0] = json.loads(sys.argv[1])
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri
name, args, kwargs = json.loads(sys.argv[2])
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
try:
    out = {"result": getattr(_cri, name)(*args, **kwargs)}
except _cri.CriError as exc:
    out = {"error": str(exc)}
print(json.dumps(out))
"""


def as_nobody(name, *args, **kwargs):
    """Call ``_cri.<name>`` as user nobody, in a new interpreter (never a fork of this process, which may hold gRPC state)."""
    done = subprocess.run(
        [sys.executable, "-c", _AS_NOBODY, json.dumps(sys.path), json.dumps([name, args, kwargs])],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def listening(tmp_path):
    """A unix socket that accepts connections, like a runtime's."""
    made = []

    def make(name):
        path = str(tmp_path / name)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(1)
        made.append(s)
        return path

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize(
    "given, expected",
    [
        ("unix:///run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock"),
        ("unix:/run/crio/crio.sock", "unix:///run/crio/crio.sock"),
        ("/var/run/cri-dockerd.sock", "unix:///var/run/cri-dockerd.sock"),
    ],
)
def test_normalize_endpoint(given, expected):
    assert _cri.normalize_endpoint(given) == expected


@pytest.mark.parametrize("bad", ["tcp://127.0.0.1:1234", "npipe:////./pipe/containerd", "unix://relative.sock", "containerd.sock"])
def test_unsupported_endpoints_fail_in_one_sentence(bad):
    with pytest.raises(_cri.CriError) as err:
        _cri.normalize_endpoint(bad)
    assert repr(bad) in str(err.value)
    assert str(err.value).count(". ") == 0 or str(err.value).endswith(".")


def test_resolve_prefers_option(tmp_path, listening):
    crictl = tmp_path / "crictl.yaml"
    crictl.write_text("runtime-endpoint: unix:///elsewhere.sock\n")
    live = listening("live.sock")
    got = _cri.resolve_endpoint("unix://" + live, crictl_config=str(crictl), defaults=("unix://" + live,))
    assert got == ("unix://" + live, "option")


def test_resolve_uses_crictl_before_defaults(tmp_path, listening):
    live = listening("live.sock")
    crictl = tmp_path / "crictl.yaml"
    crictl.write_text("# crictl\nruntime-endpoint: unix:///run/other.sock\nimage-endpoint: unix:///x.sock\ntimeout: 10\n")
    assert _cri.resolve_endpoint(None, crictl_config=str(crictl), defaults=("unix://" + live,)) == ("unix:///run/other.sock", "crictl")


def test_resolve_skips_dead_defaults(tmp_path, listening):
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(dead))
    s.close()  # a stale socket file: exists, refuses connections
    live = listening("live.sock")
    defaults = ("unix://" + str(tmp_path / "missing.sock"), "unix://" + str(dead), "unix://" + live)
    assert _cri.resolve_endpoint(None, crictl_config=str(tmp_path / "none.yaml"), defaults=defaults) == ("unix://" + live, "default")


def test_resolve_with_nothing_says_what_it_tried(tmp_path):
    with pytest.raises(_cri.CriError) as err:
        _cri.resolve_endpoint(None, crictl_config=str(tmp_path / "none.yaml"), defaults=("unix:///nonexistent/a.sock",))
    msg = str(err.value)
    assert "No CRI endpoint found" in msg and "unix:///nonexistent/a.sock" in msg and "CONTAINER_RUNTIME_ENDPOINT" in msg


def test_read_crictl_endpoint_without_yaml(tmp_path, monkeypatch):
    crictl = tmp_path / "crictl.yaml"
    crictl.write_text("runtime-endpoint: 'unix:///run/k3s/containerd/containerd.sock'\n")
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)  # PyYAML absent on the node
    assert _cri.read_crictl_endpoint(str(crictl)) == "unix:///run/k3s/containerd/containerd.sock"


@pytest.mark.parametrize("text", ["", "runtime-endpoint:\n", ": [broken\n", "- a list\n"])
def test_read_crictl_endpoint_ignores_useless_files(tmp_path, text):
    crictl = tmp_path / "crictl.yaml"
    crictl.write_text(text)
    assert _cri.read_crictl_endpoint(str(crictl)) is None


def test_probe_socket_reasons(tmp_path, listening):
    assert _cri.probe_socket(listening("ok.sock")) is None
    assert "does not exist" in _cri.probe_socket(str(tmp_path / "nope.sock"))
    regular = tmp_path / "file"
    regular.write_text("")
    assert _cri.probe_socket(str(regular)) is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_probe_socket_permission_denied(tmp_path, listening):
    path = listening("root-only.sock")
    os.chmod(path, 0o600)
    os.chmod(str(tmp_path), 0o755)
    reason = as_nobody("probe_socket", path)["result"]
    assert reason.startswith("permission denied on socket %s" % path)


def test_unreachable_socket_error_names_endpoint_and_call(tmp_path, cri_client):
    client = cri_client("unix://" + str(tmp_path / "none.sock"))
    with pytest.raises(_cri.CriError) as err:
        client.version()
    assert str(err.value) == "CRI endpoint unix://%s is unusable for Version: socket %s does not exist." % (tmp_path / "none.sock", tmp_path / "none.sock")


def test_not_a_cri_server(grpc_server, cri_client):
    server = grpc_server()
    with pytest.raises(_cri.CriError) as err:
        cri_client(server.endpoint).list_images()
    msg = str(err.value)
    assert msg.startswith("CRI endpoint %s does not implement ListImages" % server.endpoint)
    assert "UNIMPLEMENTED" in msg and "\n" not in msg
    assert err.value.code == "UNIMPLEMENTED"


def test_deadline_exceeded_names_timeout(grpc_server, cri_client):
    server = grpc_server({"Version": ("sleep", 2)})
    with pytest.raises(_cri.CriError) as err:
        cri_client(server.endpoint, timeout=0.3).version()
    assert str(err.value) == "CRI endpoint %s did not answer Version within 0.3 seconds (cri_timeout)." % server.endpoint


def test_runtime_error_text_is_passed_on(grpc_server, cri_client):
    text = 'image "sha256:abc": failed to remove\nsnapshot in use'
    server = grpc_server({"RemoveImage": ("abort", (grpc.StatusCode.UNKNOWN, text))})
    client = cri_client(server.endpoint)
    with pytest.raises(_cri.CriError) as err:
        client.call("RemoveImage", image={"image": "sha256:abc"})
    fut = client.call_async("RemoveImage", image={"image": "sha256:abc"})
    with pytest.raises(_cri.CriError) as err2:
        fut.result()
    expected = 'CRI endpoint %s failed RemoveImage: image "sha256:abc": failed to remove snapshot in use (UNKNOWN).' % server.endpoint
    assert str(err.value) == expected == str(err2.value)


def test_counts_rpcs_per_method(grpc_server, cri_client):
    reply = pb.VersionResponse(version="0.1.0", runtime_name="fake", runtime_version="1.0", runtime_api_version="v1").SerializeToString()
    server = grpc_server({"Version": ("reply", reply), "ListImages": ("reply", b"")})
    client = cri_client(server.endpoint)
    assert client.version().runtime_name == "fake"
    client.version()
    assert client.list_images() == []
    assert client.rpc_calls == {"Version": 2, "ListImages": 1}


def test_unknown_method_is_refused(grpc_server, cri_client):
    client = cri_client(grpc_server().endpoint)
    with pytest.raises(_cri.CriError, match="not known"):
        client.call("ExecSync")


def test_proto_matches_upstream_field_numbers():
    """Spot-check wire compatibility with k8s.io/cri-api runtime.v1 (field numbers, not names, go on the wire)."""
    fields = {
        "Container": {"id": 1, "pod_sandbox_id": 2, "metadata": 3, "image": 4, "image_ref": 5, "state": 6, "created_at": 7, "labels": 8, "image_id": 10},
        "Image": {"id": 1, "repo_tags": 2, "repo_digests": 3, "size": 4, "spec": 7, "pinned": 8},
        "FilesystemUsage": {"timestamp": 1, "fs_id": 2, "used_bytes": 3, "inodes_used": 4},
        "ImageFsInfoResponse": {"image_filesystems": 1, "container_filesystems": 2},
        "PodSandbox": {"id": 1, "metadata": 2, "state": 3, "created_at": 4, "labels": 5},
        "ImageSpec": {"image": 1, "annotations": 2, "user_specified_image": 18, "runtime_handler": 19, "image_ref": 20},
        "ContainerStatus": {"started_at": 5, "finished_at": 6, "mounts": 14, "log_path": 15, "image_id": 17},
        "ContainerConfig": {"envs": 6, "mounts": 7, "labels": 9},
        "Mount": {"container_path": 1, "host_path": 2, "readonly": 3, "image": 9, "image_sub_path": 10},
    }
    for message, numbers in fields.items():
        desc = pb.DESCRIPTOR.message_types_by_name[message]
        assert {f.name: f.number for f in desc.fields if f.name in numbers} == numbers
    assert pb.DESCRIPTOR.package == "runtime.v1"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_detection_says_permission_denied_and_names_become(tmp_path, listening):
    """Issue 22, item 3: a default socket that exists but this user may not use is not "No CRI endpoint found"."""
    path = listening("root-only.sock")
    os.chmod(path, 0o600)
    os.chmod(str(tmp_path), 0o755)
    defaults = ("unix://" + str(tmp_path / "missing.sock"), "unix://" + path)
    message = as_nobody("resolve_endpoint", None, crictl_config=str(tmp_path / "none.yaml"), defaults=defaults)["error"]
    assert message.startswith("Permission denied on the CRI socket ") and "unix://%s" % path in message
    assert message.endswith(": cri_endpoint is unset and this user may not connect to it; run as root (become: true).")


def test_requests_built_fast_equal_json_format_and_fall_back_to_it():
    from google.protobuf import json_format

    _build = _cri._build  # pylint: disable=protected-access
    for cls, fields in ((pb.RemoveImageRequest, {"image": {"image": "sha256:abc"}}), (pb.StatusRequest, {"verbose": True}),
                        (pb.StopContainerRequest, {"container_id": "c1", "timeout": 3})):
        assert _build(cls, fields) == json_format.ParseDict(fields, cls())
    # what the constructor refuses (a JSON name, a number as a string) goes through json_format
    assert _build(pb.StopContainerRequest, {"containerId": "c1", "timeout": "3"}) == pb.StopContainerRequest(container_id="c1", timeout=3)
    with pytest.raises(json_format.ParseError):
        _build(pb.StatusRequest, {"no_such_field": 1})


def test_shared_answers_send_each_read_once_until_a_change(grpc_server, cri_client):
    reply = pb.VersionResponse(version="0.1.0", runtime_name="fake", runtime_version="1.0", runtime_api_version="v1").SerializeToString()
    server = grpc_server({"Version": ("reply", reply), "ListImages": ("reply", b""), "RemoveImage": ("reply", b"")})
    client = cri_client(server.endpoint)
    client.share_answers("node")
    assert client.version().runtime_name == client.version().runtime_name == "fake"
    assert client.list_images() == client.list_images() == []
    assert client.call_async("ListImages").result() is not None
    assert client.rpc_calls == {"Version": 1, "ListImages": 1}
    client.call("RemoveImage", image={"image": "sha256:abc"})  # may change the node: its reads are sent again
    client.list_images()
    client.version()
    assert client.rpc_calls == {"Version": 1, "ListImages": 2, "RemoveImage": 1}


def test_runtime_scope_shares_only_what_the_runtime_says_of_itself(grpc_server, cri_client):
    reply = pb.VersionResponse(version="0.1.0", runtime_name="fake", runtime_version="1.0", runtime_api_version="v1").SerializeToString()
    server = grpc_server({"Version": ("reply", reply), "ListImages": ("reply", b"")})
    client = cri_client(server.endpoint)
    client.share_answers("runtime")
    client.version(), client.version(), client.list_images(), client.list_images()
    assert client.rpc_calls == {"Version": 1, "ListImages": 2} and client.node_memo is None


def test_an_unshared_client_sends_every_call(grpc_server, cri_client):
    server = grpc_server({"ListImages": ("reply", b"")})
    client = cri_client(server.endpoint)
    client.list_images(), client.list_images()
    assert client.rpc_calls == {"ListImages": 2}


@pytest.mark.parametrize("method, reads", [("ListImages", True), ("RemoveImage", False), ("containerd.images.List", True),
                                           ("containerd.images.Delete", False), ("containerd.leases.Create", False)])
def test_reads_only(method, reads):
    assert _cri._reads_only(method) is reads  # pylint: disable=protected-access
