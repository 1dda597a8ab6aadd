# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_gc's and disk_usage's options: bad input fails with one sentence naming what was written."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage, _storage_gc
from ansible_collections.kubenode.gc.plugins.modules import disk_usage, storage_gc


def sgc(**kw):
    return _storage_gc.options(params_for(storage_gc.ARGUMENT_SPEC, **kw))


def test_defaults():
    opts = sgc()
    assert opts["namespaces"] == [] and opts["keep_images"] == [] and opts["ingest_max_age"] == 3600 * 10**9
    assert opts["lease_max_age"] is None and opts["lock_timeout"] == 300


@pytest.mark.parametrize("kw, message", [
    (dict(namespaces=["moby", "k8s.io"]), "namespaces must not name k8s.io"),
    (dict(namespaces=[""]), "empty name"),
    (dict(ingest_max_age="soon"), "ingest_max_age must be a Go duration such as 1h or 30m, got 'soon'"),
    (dict(lease_max_age="-1h"), "lease_max_age must not be negative, got '-1h'"),
    (dict(keep_images=["img[1-"]), "never closed"),
    (dict(lock_timeout=float("nan")), "lock_timeout must be a finite number"),
])
def test_bad_options_fail_in_one_sentence(kw, message):
    with pytest.raises(OptionError, match=message) as err:
        sgc(**kw)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kw, message", [
    (dict(pod_logs_dir="logs"), "pod_logs_dir must be an absolute path, got 'logs'"),
    (dict(walk_limit=0), "walk_limit must be 1 or more"),
])
def test_disk_usage_bad_options(kw, message):
    with pytest.raises(OptionError, match=message):
        _disk_usage.options(params_for(disk_usage.ARGUMENT_SPEC, **kw))


class _LogsCri:
    """ListPodSandbox, ListContainers and ContainerStatus of two pods: one logs outside pod_logs_dir, one without a log path."""

    def __init__(self, elsewhere):
        from types import SimpleNamespace as NS

        self.NS = NS
        self.pods = [NS(id="s1", metadata=NS(namespace="ns", name="web", uid="u1")), NS(id="s2", metadata=NS(namespace="ns", name="old", uid="u2"))]
        self.containers = [NS(id="c1", pod_sandbox_id="s1"), NS(id="c2", pod_sandbox_id="s2")]
        self.paths = {"c1": str(elsewhere / "ns_web_u1" / "app" / "0.log"), "c2": ""}
        self.asked = []  # the containers ContainerStatus was asked about

    def list_pod_sandbox(self):
        return self.pods

    def list_containers(self):
        return self.containers

    def call_async(self, method, container_id):
        assert method == "ContainerStatus"
        self.asked.append(container_id)
        status = self.NS(status=self.NS(log_path=self.paths[container_id]))
        return self.NS(result=lambda: status)


def test_logs_are_found_at_the_cris_log_paths_and_pod_logs_dir_is_the_fallback(tmp_path):
    elsewhere, fallback = tmp_path / "elsewhere", tmp_path / "pods"
    (elsewhere / "ns_web_u1" / "app").mkdir(parents=True)
    (elsewhere / "ns_web_u1" / "app" / "0.log").write_bytes(b"x" * 40960)
    (fallback / "ns_old_u2" / "app").mkdir(parents=True)
    (fallback / "ns_old_u2" / "app" / "0.log").write_bytes(b"y" * 8192)
    # the kubelet's copy of a pod the CRI already named is not counted twice
    (fallback / "ns_web_u1").symlink_to(elsewhere / "ns_web_u1")
    found = _disk_usage.container_logs(_disk_usage.Walker(100), _LogsCri(elsewhere), str(fallback))
    logs = {i["id"]: i for i in found}
    assert sorted(i["id"] for i in found) == ["ns_old_u2", "ns_web_u1"]
    assert logs["ns_web_u1"]["bytes"] >= 40960 and logs["ns_web_u1"]["name"] == "web"
    assert 8192 <= logs["ns_old_u2"]["bytes"] < 40960


def test_log_paths_known_from_containerds_records_ask_the_cri_for_the_others_only(tmp_path):
    elsewhere, fallback = tmp_path / "elsewhere", tmp_path / "pods"
    (elsewhere / "ns_web_u1" / "app").mkdir(parents=True)
    (elsewhere / "ns_web_u1" / "app" / "0.log").write_bytes(b"x" * 40960)
    fallback.mkdir()
    cri = _LogsCri(elsewhere)
    known = {"c1": str(elsewhere / "ns_web_u1" / "app" / "0.log")}
    with_records = _disk_usage.log_dirs(cri, known)
    assert cri.asked == ["c2"]  # the one container no record gives a path for
    cri.asked = []
    assert with_records == _disk_usage.log_dirs(cri) and cri.asked == ["c1", "c2"]
    cri.asked = []
    # a record of a container the CRI does not list (ctr's, or removed since) names no pod
    assert _disk_usage.log_dirs(cri, dict(known, c9=str(tmp_path / "y" / "0.log"))) == with_records
    assert cri.asked == ["c2"]
    cri.asked = []
    found = _disk_usage.container_logs(_disk_usage.Walker(100), cri, str(fallback), known)
    assert [(i["id"], i["bytes"] >= 40960) for i in found] == [("ns_web_u1", True)]


def test_walker_stops_and_says_where(tmp_path):
    for n in range(4):
        (tmp_path / ("d%d" % n)).mkdir()
        (tmp_path / ("d%d" % n) / "f").write_bytes(b"x" * 5000)
    walker = _disk_usage.Walker(3)
    _size, complete = walker.size(str(tmp_path))
    assert complete is False and walker.stopped == [str(tmp_path)]
    full = _disk_usage.Walker(100)
    size, complete = full.size(str(tmp_path))
    assert complete and size >= 4 * 5000 and full.stopped == []


class _Version:
    runtime_name = "containerd"
    runtime_version = "2.1.4"


class _Cri:
    endpoint = "unix:///fake.sock"

    def version(self):
        return _Version()

    def list_pod_sandbox(self):
        return []


class _Api:
    """containerd's API as storage_gc calls it: the ingest is already gone, the image fails, the rest succeeds."""

    calls = []

    def __init__(self, cri):
        pass

    def abort_ingest(self, ns, ref):
        from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdError
        raise ContainerdError("containerd at unix:///fake.sock failed content Abort in namespace moby: not found (NOT_FOUND).", code="NOT_FOUND")

    def delete_lease(self, ns, lease_id, sync=True):
        self.calls.append(("lease", lease_id))

    def delete_image(self, ns, name, sync=True):
        from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdError
        raise ContainerdError("containerd at unix:///fake.sock failed images Delete in namespace moby: boom (UNKNOWN).", code="UNKNOWN")


def _fake_node(monkeypatch, tmp_path):
    from tests.unit.plugins.module_utils.test__storage_policy import NOW, inventory

    monkeypatch.setattr(_storage_gc, "read_imagefs", lambda client: [{"kind": "image", "mountpoint": str(tmp_path)}])
    monkeypatch.setattr(_storage_gc._inventory, "read", lambda api: inventory())
    monkeypatch.setattr(_storage_gc._inventory, "measure", lambda api, inv, wanted: None)
    monkeypatch.setattr(_storage_gc, "ContainerdClient", _Api)
    monkeypatch.setenv("KUBENODE_GC_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(_storage_gc.time, "time_ns", lambda: NOW)  # the inventory's clock
    _Api.calls = []


def test_a_failure_after_removals_says_changed_and_returns_the_plan(monkeypatch, tmp_path):
    _fake_node(monkeypatch, tmp_path)
    opts = sgc(namespaces=["moby"], ingest_max_age="1s")
    with pytest.raises(KubenodeGcError) as err:
        _storage_gc.run(_Cri(), opts)
    result = err.value.result
    assert str(err.value).startswith("storage_gc stopped at image busy:1 in namespace moby: containerd at unix:///fake.sock failed images Delete")
    assert result["changed"] is True and _Api.calls == [("lease", "old")]
    assert result["already_gone"] == [{"kind": "ingest", "namespace": "moby", "id": "ing-1"}]
    assert [s["kind"] for s in result["plan"]][:3] == ["ingest", "lease", "image"]
    assert {s["kind"] for s in result["plan"][3:]} == {"content", "snapshot"}
    # removed: what this run removed before the failure (the cleanup's history record keeps it), not the gone ingest
    assert result["removed"] == [s for s in result["plan"] if s["kind"] == "lease"] and result["removed"][0]["id"] == "old"


def test_check_mode_calls_nothing_that_changes(monkeypatch, tmp_path):
    _fake_node(monkeypatch, tmp_path)
    result = _storage_gc.run(_Cri(), sgc(namespaces=["moby"], ingest_max_age="1s"), check_mode=True)
    assert result["changed"] is False and _Api.calls == [] and len(result["plan"]) == 11 and result["freed_bytes"] == 0
    assert result["removed"] == []


class _RecordingApi(_Api):
    """containerd's API where every call succeeds, and nothing changes (the list read again is the same)."""

    def abort_ingest(self, ns, ref):
        self.calls.append(("ingest", ref))

    def delete_image(self, ns, name, sync=True):
        self.calls.append(("image", name))

    def collect_garbage(self, ns, prefix):
        self.calls.append(("collection", ns))


def test_the_module_removes_only_its_own_steps_and_leaves_the_collections_to_containerd(monkeypatch, tmp_path):
    _fake_node(monkeypatch, tmp_path)
    monkeypatch.setattr(_storage_gc, "ContainerdClient", _RecordingApi)
    # the expired lease holds ing-1, written to 7000 s ago: not idle for ingest_max_age, the module does not abort it;
    # the plan lists it after the lease as containerd's collection's (its lease gone, it has no expiry of its own)
    result = _storage_gc.run(_Cri(), sgc(namespaces=[], ingest_max_age="3h"))
    assert [s["kind"] for s in result["plan"]] == ["lease", "content", "snapshot", "ingest"]
    assert _Api.calls == [("lease", "old"), ("collection", "moby")]
    assert "collected" not in result["plan"][-1]
    # the fake containerd kept everything: each planned object of the collection is named in a warning, not removed
    assert result["removed"] == result["plan"][:1]
    assert len([w for w in result["warnings"] if "which the plan expected it to free" in w]) == 3


class _Done:
    def __init__(self, error=None):
        self.error = error

    def result(self):
        if self.error:
            raise self.error


class _LabelApi:
    """containerd's API for discard_unpacked_layers: content.Update calls recorded, then a collection that frees the blobs."""

    calls = []
    fail_on = None

    def __init__(self, cri):
        pass

    def remove_content_labels_async(self, ns, digest, labels):
        from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdError
        self.calls.append(("labels", ns, digest, tuple(labels)))
        if digest == self.fail_on:
            return _Done(ContainerdError("containerd at unix:///fake.sock failed content Update in namespace k8s.io: boom (UNKNOWN).", code="UNKNOWN"))
        return _Done()

    def collect_garbage(self, ns, prefix):
        self.calls.append(("gc", ns))


class _StatusCri(_Cri):
    def status(self, verbose=True):
        import json
        from types import SimpleNamespace
        return SimpleNamespace(info={"config": json.dumps({"containerd": {"snapshotter": "overlayfs"}})})


def _layer_node(monkeypatch, tmp_path):
    from tests.unit.plugins.module_utils.test__layer_blobs import NOW, node, pulled

    inv = node()
    pulled(inv["k8s.io"], "app:1", ["l-base", "l-1"])
    pulled(inv["k8s.io"], "app:2", ["l-base", "l-2"])
    after = node()
    after["k8s.io"] = dict(inv["k8s.io"], content={d: i for d, i in inv["k8s.io"]["content"].items() if not d.startswith("l-")})
    reads = [inv, after]
    monkeypatch.setattr(_storage_gc, "read_imagefs", lambda client: [{"kind": "image", "mountpoint": str(tmp_path)}])
    monkeypatch.setattr(_storage_gc._inventory, "read", lambda api: reads.pop(0))
    monkeypatch.setattr(_storage_gc._inventory, "measure", lambda api, inv, wanted: None)
    monkeypatch.setattr(_storage_gc, "ContainerdClient", _LabelApi)
    monkeypatch.setenv("KUBENODE_GC_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(_storage_gc.time, "time_ns", lambda: NOW)
    _LabelApi.calls = []
    _LabelApi.fail_on = None


def test_discard_removes_each_manifests_layer_references_in_one_update_and_lets_containerd_collect(monkeypatch, tmp_path):
    _layer_node(monkeypatch, tmp_path)
    check = _storage_gc.run(_StatusCri(), sgc(discard_unpacked_layers=True), check_mode=True)
    assert _LabelApi.calls == [] and check["changed"] is False
    assert [(s["kind"], s["id"], s["images"]) for s in check["plan"]] == [
        ("layer_blob", "l-1", ["app:1"]), ("layer_blob", "l-2", ["app:2"]), ("layer_blob", "l-base", ["app:1", "app:2"])]
    assert set(check["plan"][0]) == {"kind", "namespace", "id", "bytes", "images"}  # the references are not shown
    _layer_node(monkeypatch, tmp_path)
    result = _storage_gc.run(_StatusCri(), sgc(discard_unpacked_layers=True))
    L = "containerd.io/gc.ref.content.l."
    assert _LabelApi.calls == [("labels", "k8s.io", "m-app:1", (L + "0", L + "1")), ("labels", "k8s.io", "m-app:2", (L + "0", L + "1")),
                               ("gc", "k8s.io")]
    assert result["changed"] is True and result["removed"] == check["plan"] and result["warnings"] == []


def test_discard_stopped_by_a_failure_says_changed_when_a_manifest_lost_its_references(monkeypatch, tmp_path):
    _layer_node(monkeypatch, tmp_path)
    _LabelApi.fail_on = "m-app:2"
    with pytest.raises(KubenodeGcError) as err:
        _storage_gc.run(_StatusCri(), sgc(discard_unpacked_layers=True))
    assert str(err.value).startswith("storage_gc stopped at the layer references of manifest m-app:2 in namespace k8s.io: containerd at")
    assert err.value.result["changed"] is True and ("gc", "k8s.io") not in _LabelApi.calls


def test_discard_without_a_known_snapshotter_removes_nothing_and_says_why(monkeypatch, tmp_path):
    _layer_node(monkeypatch, tmp_path)

    class Cri(_StatusCri):
        def status(self, verbose=True):
            from types import SimpleNamespace
            return SimpleNamespace(info={})

    result = _storage_gc.run(Cri(), sgc(discard_unpacked_layers=True))
    assert result["plan"] == [] and result["changed"] is False and _LabelApi.calls == []
    assert "does not say which snapshotter its CRI unpacks images into" in result["warnings"][0]
