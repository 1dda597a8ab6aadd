# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri import _image_ref
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _snapshot as snap


@pytest.mark.parametrize(
    "ns, expected",
    [
        (0, None),
        (1, "1970-01-01T00:00:00.000000001Z"),
        (1795320100368168343, "2026-11-22T04:01:40.368168343Z"),
    ],
)
def test_rfc3339(ns, expected):
    assert snap.rfc3339(ns) == expected


@pytest.mark.parametrize(
    "ref, expected",
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("myorg/app:v2", "docker.io/myorg/app:v2"),
        ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
        ("localhost/app", "localhost/app:latest"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("quay.io/x/y@sha256:abc", "quay.io/x/y@sha256:abc"),
        ("app@sha256:abc", "docker.io/library/app@sha256:abc"),
        ("sha256:abc", "sha256:abc"),
        ("", ""),
    ],
)
def test_normalize_image_ref(ref, expected):
    assert _image_ref.normalize_image_ref(ref) == expected


@pytest.mark.parametrize(
    "capacity, available, expected",
    [
        (1000, 600, 40),  # IG-10
        (1000, 50, 95),  # IG-12
        (1001, 160, 85),  # D-1: flooring the free part rounds usage up
        (1000, 9, 100),  # D-2
        (1000, 1200, 0),  # D-3: available is clamped to capacity
        (0, 10, None),  # D-4: no capacity, no usage
    ],
)
def test_usage_percent_kubelet_formula(capacity, available, expected):
    assert snap.usage_percent(capacity, available) == expected


def test_statvfs_usage_matches_os():
    got = snap.statvfs_usage("/")
    st = os.statvfs("/")
    assert got["capacity_bytes"] == st.f_blocks * st.f_frsize
    assert got["inodes_used"] == got["inodes_total"] - got["inodes_free"]
    assert got["usage_percent"] == 100 - (st.f_bavail * st.f_frsize * 100) // (st.f_blocks * st.f_frsize)


@pytest.mark.parametrize(
    "info, expected",
    [
        ({"config": json.dumps({"sandboxImage": "registry.k8s.io/pause:3.6"})}, "registry.k8s.io/pause:3.6"),
        ({"config": json.dumps({"pinnedImages": {"sandbox": "registry.k8s.io/pause:3.10"}})}, "registry.k8s.io/pause:3.10"),
        ({"config": json.dumps({"pause_image": "registry.k8s.io/pause:3.9"})}, "registry.k8s.io/pause:3.9"),
        ({"config": "not json"}, None),
        ({"config": "[]"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_sandbox_image_from_info(info, expected):
    assert snap.sandbox_image_from_info(info) == expected


def _img(id_, tags=(), digests=()):
    return {"id": id_, "repo_tags": list(tags), "repo_digests": list(digests), "size": 1, "pinned": False}


def _ctr(id_, image_id="", image_ref="", image=""):
    return {"id": id_, "image_id": image_id, "image_ref": image_ref, "image": image}


def test_image_users_matches_id_tag_digest_and_short_forms():
    images = [
        _img("sha256:aaa", ["docker.io/library/app:1"]),
        _img("sha256:bbb", ["quay.io/x/b:2"], ["quay.io/x/b@sha256:ddd"]),
        _img("sha256:ccc", ["registry.k8s.io/c:3"]),
        _img("sha256:eee", ["docker.io/library/unused:1"]),
    ]
    containers = [
        _ctr("c1", image_ref="sha256:aaa"),  # containerd 1.6: image_ref is the id
        _ctr("c2", image="app:1"),  # short tag in the image spec
        _ctr("c3", image_ref="quay.io/x/b@sha256:ddd"),  # cri-o style digest ref
        _ctr("c4", image_id="ccc"),  # bare hex id
        _ctr("c5", image_id="sha256:gone", image="nothere:1"),  # image no longer listed
    ]
    users = snap.image_users(images, containers)
    assert users == {"sha256:aaa": ["c1", "c2"], "sha256:bbb": ["c3"], "sha256:ccc": ["c4"]}


def test_image_index_resolves_nothing_for_empty_ref():
    assert snap.ImageIndex([_img("sha256:aaa", ["a:1"])]).resolve("") == set()


def test_public_keeps_only_documented_keys():
    rec = {"id": "x", "name": "n", "namespace": "ns", "uid": "u", "attempt": 0, "state": "ready", "created_at": None, "created_at_ns": 0}
    assert snap.public("sandboxes", [rec]) == [{k: rec[k] for k in snap.PUBLIC_KEYS["sandboxes"]}]


@pytest.mark.parametrize(
    "name, version, expected",
    [
        ("containerd", "v1.6.20", False),
        ("containerd", "1.7.24", False),
        ("containerd", "2.0.5", False),
        ("containerd", "2.1.9+unknown", True),
        ("containerd", "v2.2.0", True),
        ("cri-o", "1.30.4", False),
        ("cri-o", "1.37.0", True),
        ("docker", "0.3.16", False),  # cri-dockerd has no image volumes
        ("some-runtime", "0.1", True),  # unknown: asked, an image may be at stake
        ("containerd", "devel", True),  # unparsable: asked
        ("containerd", "2", False),  # 2.0.0, the parser image_pin uses too
        ("containerd", "1.6.20~ds1", False),
    ],
)
def test_supports_image_volumes(name, version, expected):
    assert snap.supports_image_volumes({"name": name, "version": version}) is expected


class _Mount:
    def __init__(self, image=None, host_path=""):
        self.image = type("Spec", (), {"image": image or ""})()
        self.host_path = host_path
        self._has = image is not None

    def HasField(self, name):
        return name == "image" and self._has


class _StatusFuture:
    def __init__(self, mounts=None, error=None):
        self.mounts, self.error = mounts, error

    def result(self):
        if self.error:
            raise self.error
        return type("Resp", (), {"status": type("Status", (), {"mounts": self.mounts})()})()


class _StatusClient:
    def __init__(self, mounts, errors=None):
        self.mounts, self.errors, self.asked = mounts, errors or {}, []

    def call_async(self, method, container_id):
        assert method == "ContainerStatus"
        self.asked.append(container_id)
        return _StatusFuture(self.mounts.get(container_id, []), self.errors.get(container_id))


def _container(cid, image="app:1"):
    return {"id": cid, "image_id": "", "image_ref": "", "image": image}


def test_image_mounts_make_an_image_in_use_and_are_read_once_per_container():
    images = [
        {"id": "sha256:" + "a" * 64, "repo_tags": ["docker.io/library/app:1"], "repo_digests": []},
        {"id": "sha256:" + "b" * 64, "repo_tags": ["docker.io/library/vol:1"], "repo_digests": []},
        {"id": "sha256:" + "c" * 64, "repo_tags": ["docker.io/library/junk:1"], "repo_digests": []},
    ]
    client = _StatusClient({"c1": [_Mount(host_path="/x"), _Mount("b" * 64)], "c2": []})
    containers = [_container("c1"), _container("c2")]
    known = snap.read_image_mounts(client, containers)
    assert known == {"c1": ["b" * 64], "c2": []} and containers[0]["image_mounts"] == ["b" * 64]
    users = snap.image_users(images, containers)
    assert users == {"sha256:" + "a" * 64: ["c1", "c2"], "sha256:" + "b" * 64: ["c1"]}
    # a later look asks only for the containers it has not seen
    client.mounts["c3"] = [_Mount("docker.io/library/junk:1")]
    later = [_container("c1"), _container("c3")]
    snap.read_image_mounts(client, later, known)
    assert client.asked == ["c1", "c2", "c3"]
    assert snap.image_users(images, later)["sha256:" + "c" * 64] == ["c3"]


def test_image_mounts_of_a_container_gone_since_the_list_are_none_other_errors_raise():
    from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

    gone = KubenodeGcError("gone")
    gone.code = "NOT_FOUND"
    client = _StatusClient({}, {"c1": gone})
    containers = [_container("c1")]
    assert snap.read_image_mounts(client, containers) == {"c1": []}
    broken = KubenodeGcError("CRI endpoint x failed ContainerStatus: boom (UNKNOWN).")
    broken.code = "UNKNOWN"
    with pytest.raises(KubenodeGcError, match="boom"):
        snap.read_image_mounts(_StatusClient({}, {"c1": broken}), [_container("c1")])


def test_status_calls_are_issued_concurrently_in_bounded_chunks(monkeypatch):
    monkeypatch.setattr(snap, "STATUS_CONCURRENCY", 2)
    order = []

    class Client(_StatusClient):
        def call_async(self, method, container_id):
            order.append(("start", container_id))
            fut = super().call_async(method, container_id)
            real = fut.result

            def result():
                order.append(("wait", container_id))
                return real()

            fut.result = result
            return fut

    snap.read_image_mounts(Client({}), [_container("c%d" % n) for n in range(3)])
    assert order == [("start", "c0"), ("start", "c1"), ("wait", "c0"), ("wait", "c1"), ("start", "c2"), ("wait", "c2")]


class _ImagesClient:
    """list_images only; ``node_memo`` as CriClient has it (None unless the node's reads are shared)."""

    def __init__(self, memo):
        self.node_memo, self.lists = memo, 0

    def list_images(self):
        self.lists += 1
        return [_Image("sha256:" + "a" * 64, ["app:1"]), _Image("sha256:" + "b" * 64, ["registry.k8s.io/pause:3.9"])]


class _Image:
    def __init__(self, image_id, tags):
        self.id, self.repo_tags, self.repo_digests, self.size, self.pinned = image_id, tags, [], 10, False


def test_shared_reads_build_the_image_records_and_index_once_and_give_each_caller_its_own(monkeypatch):
    built = []
    real = snap.ImageIndex

    def counting(images):
        built.append(len(images))
        return real(images)

    monkeypatch.setattr(snap, "ImageIndex", counting)
    client = _ImagesClient({})
    first, index = snap._indexed_images(client)  # pylint: disable=protected-access
    first[0]["used_by"] = ["c1"]
    first[0]["repo_tags"].append("docker.io/library/app:changed")
    second, again = snap._indexed_images(client)  # pylint: disable=protected-access
    assert client.lists == 1 and built == [2] and again is index
    assert second[0] == {"id": "sha256:" + "a" * 64, "repo_tags": ["docker.io/library/app:1"], "repo_digests": [], "size": 10, "pinned": False}
    assert index.resolve("app:1") == {"sha256:" + "a" * 64}
    client.node_memo.clear()  # what CriClient does on a call that may change the node
    snap._indexed_images(client)  # pylint: disable=protected-access
    assert client.lists == 2 and built == [2, 2]
    # a client that does not share the node's reads lists every time
    alone = _ImagesClient(None)
    snap._indexed_images(alone), snap._indexed_images(alone)  # pylint: disable=protected-access
    assert alone.lists == 2
