# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/docker: the Engine API client against a real HTTP server on a unix socket, the engine behind a CRI socket,
and the pure attribution and storage plan of a Docker data root (storage/_docker_storage)."""

import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.docker import _engine
from ansible_collections.kubenode.gc.plugins.module_utils.docker import _client
from ansible_collections.kubenode.gc.plugins.module_utils.docker._client import DockerClient
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError
from ansible_collections.kubenode.gc.plugins.module_utils.docker._names import engine_api
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _docker_storage as ds

MIB = 1 << 20
SECOND = 10**9


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def address_string(self):
        return "unix"

    def _answer(self):
        self.server.requests.append((self.command, self.path))
        status, body = self.server.routes.get((self.command, self.path.split("?")[0]), (404, {"message": "page not found"}))
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def engine(tmp_path):
    """An HTTP server on a unix socket answering ``routes`` ({(method, path): (status, JSON or bytes)})."""
    path = str(tmp_path / "docker.sock")
    server = _UnixServer(path, _Handler)
    server.routes, server.requests = {}, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, "unix://" + path
    finally:
        server.shutdown()
        server.server_close()


def test_client_speaks_json_on_versioned_paths_counts_calls_and_closes(engine):
    server, endpoint = engine
    server.routes[("GET", "/v1.41/info")] = (200, {"DockerRootDir": "/var/lib/docker"})
    server.routes[("POST", "/v1.41/build/prune")] = (200, {"CachesDeleted": ["abc"], "SpaceReclaimed": 5})
    server.routes[("DELETE", "/v1.41/volumes/my%20vol")] = (204, b"")
    calls = {"ListImages": 1}
    with DockerClient(endpoint, timeout=5, api_calls=calls) as client:
        assert client.info() == {"DockerRootDir": "/var/lib/docker"}
        assert client.prune_build_cache({"id": ["abc"], "until": ["1h"]}) == {"CachesDeleted": ["abc"], "SpaceReclaimed": 5}
        client.remove_volume("my vol")
        assert client.info()["DockerRootDir"] == "/var/lib/docker"  # the kept connection again
    assert client._conn is None  # closed
    assert calls == {"ListImages": 1, "docker.SystemInfo": 2, "docker.BuildPrune": 1, "docker.VolumeDelete": 1}
    prune = [p for m, p in server.requests if m == "POST"][0]
    assert prune.startswith("/v1.41/build/prune?") and "all=1" in prune
    assert "filters=%7B%22id%22%3A%5B%22abc%22%5D%2C%22until%22%3A%5B%221h%22%5D%7D" in prune


def test_client_errors_are_one_sentence_with_the_engines_message_and_status(engine, tmp_path):
    server, endpoint = engine
    server.routes[("DELETE", "/v1.41/volumes/busy")] = (409, {"message": "remove busy: volume is in use - [abc]"})
    server.routes[("GET", "/v1.41/system/df")] = (200, b"not json")
    with DockerClient(endpoint, timeout=5) as client:
        with pytest.raises(DockerApiError) as err:
            client.remove_volume("busy")
        assert err.value.status == 409 and err.value.operation == "VolumeDelete"
        assert str(err.value) == ("Docker Engine API at %s failed VolumeDelete (DELETE /volumes/busy): remove busy: volume is in use - [abc] "
                                  "(HTTP 409)." % endpoint)
        with pytest.raises(DockerApiError) as err:
            client.system_df()
        assert "with something that is not JSON" in str(err.value)
    missing = "unix://" + str(tmp_path / "none.sock")
    with pytest.raises(DockerApiError) as err:
        DockerClient(missing).info()
    assert str(err.value) == "Docker Engine API at %s did not answer SystemInfo: No such file or directory." % missing
    assert err.value.status is None
    with pytest.raises(DockerApiError) as err:
        DockerClient("tcp://10.0.0.1:2375")
    assert "only a unix socket" in str(err.value)


def test_the_engine_is_the_one_whose_data_root_the_cri_reports(engine, monkeypatch):
    server, endpoint = engine
    server.routes[("GET", "/v1.41/info")] = (200, {"DockerRootDir": "/srv/docker"})
    monkeypatch.setattr(_engine, "docker_endpoint", lambda cri_socket: (endpoint, "cri-dockerd"))
    client, info = _engine.connect("/run/cri-dockerd.sock", "/srv/docker")
    client.close()
    assert info["DockerRootDir"] == "/srv/docker"
    with pytest.raises(DockerApiError) as err:
        _engine.connect("/run/cri-dockerd.sock", "/var/lib/docker")
    assert str(err.value) == ("The Docker Engine at %s (cri-dockerd's --docker-endpoint) has its data root at /srv/docker, not at /var/lib/docker "
                              "where cri-dockerd's image filesystem is: it is not the engine behind the CRI socket /run/cri-dockerd.sock." % endpoint)


def test_the_docker_endpoint_comes_from_cri_dockerd_then_docker_host_then_the_default(monkeypatch):
    from ansible_collections.kubenode.gc.plugins.module_utils import _daemons

    proc = _daemons.Process(7, "cri-dockerd", ["/usr/bin/cri-dockerd", "--docker-endpoint=unix:///srv/d.sock"], {}, "/")
    monkeypatch.setattr(_daemons, "runtime_process", lambda path: ("cri-dockerd", proc))
    assert _engine.docker_endpoint("/run/cri-dockerd.sock") == ("unix:///srv/d.sock", "cri-dockerd")
    monkeypatch.setattr(_daemons, "runtime_process", lambda path: ("cri-dockerd", proc._replace(argv=["cri-dockerd"])))
    assert _engine.docker_endpoint("/run/cri-dockerd.sock") == ("unix:///var/run/docker.sock", "cri-dockerd")
    monkeypatch.setattr(_daemons, "runtime_process", lambda path: (None, None))  # a proxy in front of it, say
    assert _engine.docker_endpoint("/p.sock", {"DOCKER_HOST": "unix:///x.sock"}) == ("unix:///x.sock", "DOCKER_HOST")
    assert _engine.docker_endpoint("/p.sock", {"DOCKER_HOST": "tcp://h:2375"}) == ("unix:///var/run/docker.sock", "default")


def test_cri_dockerd_is_found_by_the_socket_its_command_line_serves(monkeypatch, tmp_path):
    """cri-dockerd binds a temporary name and renames it: /proc/net/unix never names its socket."""
    from ansible_collections.kubenode.gc.plugins.module_utils import _daemons

    sock = str(tmp_path / "cri.sock")
    procs = {11: _daemons.Process(11, "cri-dockerd", ["cri-dockerd", "--container-runtime-endpoint", "unix://" + str(tmp_path / "other.sock")], {}, "/"),
             12: _daemons.Process(12, "cri-dockerd", ["cri-dockerd", "--container-runtime-endpoint=unix://" + sock], {}, "/"),
             13: _daemons.Process(13, "sleep", ["sleep", "--container-runtime-endpoint=unix://" + sock], {}, "/")}
    monkeypatch.setattr(_daemons, "_pids", lambda: sorted(procs))
    monkeypatch.setattr(_daemons, "read_process", procs.get)
    monkeypatch.setattr(_daemons, "listener_pids", lambda path: [])
    monkeypatch.setattr(_daemons, "trust_problem", lambda proc: None)  # root's, from a root-owned executable (test__daemons.py)
    monkeypatch.setattr(_daemons, "unit_of", lambda pid: None)
    assert _daemons.runtime_process(sock) == ("cri-dockerd", procs[12])
    untrusted = _daemons.Untrusted(12, "cri-dockerd", 1000, 1000, "/home/u/cri-dockerd", "run by uid 1000, not root")
    monkeypatch.setattr(_daemons, "trust_problem", lambda proc: untrusted if proc.pid == 12 else None)
    assert _daemons.find_runtime(sock) == (None, None, [untrusted])  # another user's cri-dockerd naming the socket is ignored
    monkeypatch.setattr(_daemons, "trust_problem", lambda proc: None)
    assert _daemons.runtime_flags("cri-dockerd", procs[12].argv[1:]) == {}
    assert _daemons.runtime_flags("dockerd", ["-H", "fd://", "--data-root=/srv/docker", "--config-file", "/etc/d.json"]) == {
        "data-root": "/srv/docker", "config-file": "/etc/d.json"}
    assert _daemons.runtime_flags("dockerd", ["-g", "/old/graph"]) == {"data-root": "/old/graph"}


def test_outside_containers_are_those_the_cri_does_not_list_and_conflicts_name_their_container():
    class Engine:
        def containers(self):
            return [{"Id": "k8s1", "Names": ["/k8s_app_web_shop_uid_0"], "Image": "app:1", "ImageID": "sha256:a", "State": "running",
                     "Labels": {"io.kubernetes.pod.name": "web"}},
                    {"Id": "ci1", "Names": ["/ci-runner"], "Image": "tools:1", "ImageID": "sha256:t", "State": "paused", "Created": 5},
                    {"Id": "old1", "Names": ["/old"], "Image": "sha256:o", "ImageID": "sha256:o", "State": "dead"}]

    out = _engine.outside_containers(Engine(), {"k8s1"})
    assert [(c["id"], c["name"], c["state"], c["image_id"], c["outside_kubernetes"], c["pod_name"]) for c in out] == [
        ("ci1", "ci-runner", "running", "sha256:t", True, None), ("old1", "old", "exited", "sha256:o", True, None)]
    assert out[0]["created_at_ns"] == 5 * SECOND
    for message, cid in (
            ('conflict: unable to remove repository reference "tools:1" (must force) - container 5c1d2e3f4a5b is using its referenced '
             'image 81818e6dc230', "5c1d2e3f4a5b"),
            ("conflict: unable to delete 81818e6dc230 (must be forced) - image is being used by stopped container 0123456789ab", "0123456789ab"),
            ("conflict: unable to delete 81818e6dc230 (cannot be forced) - image is being used by running container abcdefabcdef", "abcdefabcdef"),
            ("conflict: unable to delete 81818e6dc230 (cannot be forced) - image has dependent child images", None),
            ("no such image", None)):
        assert _engine.conflict_container("CRI endpoint unix:///x failed RemoveImage: Error response from daemon: " + message) == cid


DF = {
    "LayersSize": 9 * MIB,
    "Images": [
        {"Id": "sha256:app", "RepoTags": ["app:1"], "Size": 6 * MIB, "SharedSize": 2 * MIB, "Containers": 1},
        {"Id": "sha256:old", "RepoTags": ["<none>:<none>"], "Size": 5 * MIB, "SharedSize": 2 * MIB, "Containers": 0},
    ],
    "Containers": [
        {"Id": "k1", "Names": ["/k8s_app_web"], "Image": "app:1", "State": "running", "SizeRw": 3 * MIB,
         "Labels": {"io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.name": "web"}},
        {"Id": "p1", "Names": ["/k8s_POD_web"], "Image": "pause", "State": "running", "Labels": {"io.kubernetes.docker.type": "podsandbox"}},
        {"Id": "d1", "Names": ["/ci"], "Image": "app:1", "State": "exited", "SizeRw": 4 * MIB, "Labels": {}},
    ],
    "Volumes": [
        {"Name": "data", "Driver": "local", "Labels": {}, "UsageData": {"Size": MIB, "RefCount": 0}},
        {"Name": "a" * 64, "Driver": "local", "Labels": None, "UsageData": {"Size": 2 * MIB, "RefCount": 0}},
        {"Name": "b" * 64, "Driver": "local", "Labels": None, "UsageData": {"Size": 3 * MIB, "RefCount": 1}},
        {"Name": "labelled", "Driver": "local", "Labels": {"com.docker.volume.anonymous": ""}, "UsageData": {"Size": 4 * MIB, "RefCount": 0}},
        {"Name": "c" * 64, "Driver": "nfs", "Labels": None, "UsageData": {"Size": -1, "RefCount": 0}},
    ],
    "BuildCache": [
        {"ID": "base", "Parent": "", "Type": "regular", "Shared": True, "InUse": False, "Size": 2 * MIB, "LastUsedAt": "2026-01-01T00:00:00Z"},
        {"ID": "run", "Parent": "base", "Type": "regular", "Shared": False, "InUse": False, "Size": 5 * MIB, "LastUsedAt": "2026-01-01T00:00:00Z"},
        {"ID": "leaf", "Parent": "run", "Type": "regular", "Shared": False, "InUse": False, "Size": MIB, "LastUsedAt": "2026-01-01T00:00:00Z"},
        {"ID": "ctx", "Parent": "", "Type": "source.local", "Shared": False, "InUse": True, "Size": 100, "LastUsedAt": "2026-01-01T00:00:00Z"},
        {"ID": "fresh", "Parent": "", "Type": "regular", "Shared": False, "InUse": False, "Size": 7 * MIB, "LastUsedAt": "2026-01-03T00:00:00Z"},
        {"ID": "held", "Parent": "", "Type": "regular", "Shared": False, "InUse": False, "Size": 6 * MIB, "LastUsedAt": "2026-01-01T00:00:00Z"},
        {"ID": "newchild", "Parent": "held", "Type": "regular", "Shared": False, "InUse": False, "Size": 8, "LastUsedAt": "2026-01-03T00:00:00Z"},
    ],
}


def test_attribution_counts_shared_layers_once_and_adds_up_to_the_used_bytes():
    cats = ds.attribute(DF, 100 * MIB, {"k1": 5 * MIB, "d1": MIB}, [{"namespace": "shop", "name": "web", "id": "shop_web_u", "bytes": 4096}])
    assert list(cats) == list(ds.CATEGORIES)
    assert cats["k8s_images"]["bytes"] == 9 * MIB  # LayersSize, not 6 + 5
    assert cats["k8s_images"]["objects"][0] == {"name": "app:1", "id": "sha256:app", "bytes": 4 * MIB, "shared_bytes": 2 * MIB, "containers": 1}
    assert cats["k8s_images"]["objects"][1]["name"] is None
    assert cats["writable_layers"]["bytes"] == 3 * MIB and {o["id"] for o in cats["writable_layers"]["objects"]} == {"k1", "p1"}
    assert cats["non_k8s_containers"] == {"bytes": 4 * MIB, "objects": [{"id": "d1", "name": "ci", "bytes": 4 * MIB, "image": "app:1", "state": "exited"}]}
    assert cats["container_logs"]["bytes"] == 6 * MIB + 4096
    assert cats["volumes"]["bytes"] == 10 * MIB
    vols = {o["name"]: o for o in cats["volumes"]["objects"]}
    assert (vols["data"]["anonymous"], vols["a" * 64]["anonymous"], vols["labelled"]["anonymous"]) == (False, True, True)
    assert vols["b" * 64]["in_use"] is True and vols["c" * 64]["bytes"] == 0
    assert cats["build_cache"]["bytes"] == 5 * MIB + MIB + 100 + 7 * MIB + 6 * MIB + 8  # the shared record is the image's
    assert sum(c["bytes"] for c in cats.values()) == 100 * MIB


def test_storage_plan_removes_old_unused_records_children_first_and_anonymous_unused_local_volumes():
    now = 1767484800 * SECOND  # 2026-01-04
    steps = ds.plan(DF, now, build_cache_max_age_ns=36 * 3600 * SECOND, remove_unused_volumes=True)
    # "held" stays: a newer record holds it as its parent; "ctx" is in use; "fresh" is younger
    assert steps == [{"kind": "build_cache", "id": "leaf", "bytes": MIB}, {"kind": "build_cache", "id": "run", "bytes": 5 * MIB},
                     {"kind": "build_cache", "id": "base", "bytes": 0},
                     {"kind": "volume", "id": "a" * 64, "bytes": 2 * MIB}, {"kind": "volume", "id": "labelled", "bytes": 4 * MIB}]
    assert ds.plan(DF, now) == []
    assert [s["kind"] for s in ds.plan(DF, now, build_cache_max_age_ns=36 * 3600 * SECOND)] == ["build_cache"] * 3
    assert ds.plan(DF, now, remove_unused_volumes=True) == steps[3:]


def test_a_record_held_by_a_staying_chain_stays():
    records = [{"ID": "a", "Parent": "", "LastUsedAt": "2026-01-01T00:00:00Z"}, {"ID": "b", "Parent": "a", "LastUsedAt": "2026-01-01T00:00:00Z"},
               {"ID": "c", "Parent": "b", "LastUsedAt": "2026-01-01T00:00:00Z", "InUse": True}]
    assert ds.plan({"BuildCache": records}, 1767484800 * SECOND, build_cache_max_age_ns=SECOND) == []
    records[2]["InUse"] = False
    assert [s["id"] for s in ds.plan({"BuildCache": records}, 1767484800 * SECOND, build_cache_max_age_ns=SECOND)] == ["c", "b", "a"]


def test_runtime_config_data_root_and_its_finding():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config_policy as rc

    assert rc.docker_data_root({"data-root": "/a"}, {"data-root": "/b"}) == ("/a", "command_line")
    assert rc.docker_data_root({}, {"data-root": "/b"}) == ("/b", "config_file")
    assert rc.docker_data_root({}, {"graph": "/c"}) == ("/c", "config_file")
    assert rc.docker_data_root({}, {}) == ("/var/lib/docker", "default")
    assert rc.runtime_of_name("docker") == "docker" and rc.runtime_of_name("cri-o") == "crio" and rc.runtime_of_name("containerd") == "containerd"
    info = {"name": "docker", "endpoint": "unix:///run/cri-dockerd.sock"}
    fs = [{"kind": "image", "mountpoint": "/var/lib/docker"}, {"kind": "container", "mountpoint": "/var/lib/docker"}]
    same = {"data_root": "/var/lib/docker", "data_root_source": "default"}
    assert rc.docker_findings(same, info, fs, realpath=os.path.normpath) == []
    moved = {"data_root": "/data/docker", "data_root_source": "config_file"}
    (finding,) = rc.docker_findings(moved, info, fs, realpath=os.path.normpath)
    assert (finding["severity"], finding["code"]) == ("warning", "data_root_not_imagefs")
    assert finding["message"] == ("dockerd's data root /data/docker (data-root of its daemon.json) is not the image filesystem /var/lib/docker that "
                                  "cri-dockerd at unix:///run/cri-dockerd.sock reports to the kubelet; dockerd runs with another data root until it restarts.")
    assert rc.docker_findings(same, dict(info, name="containerd"), fs)[0]["code"] == "runtime_other"


def test_dockerd_is_the_listener_else_the_one_whose_host_flag_names_the_socket(monkeypatch, tmp_path):
    """/proc/net/unix lists this network namespace's sockets only: a dockerd in another one is found by its -H."""
    from ansible_collections.kubenode.gc.plugins.module_utils import _daemons

    sock = str(tmp_path / "docker.sock")
    procs = {21: _daemons.Process(21, "dockerd", ["dockerd", "-H", "unix:///other.sock"], {}, "/"),
             22: _daemons.Process(22, "dockerd", ["/usr/sbin/dockerd", "-H", "fd://", "--host=unix://" + sock, "--data-root", "/srv/d"], {}, "/"),
             23: _daemons.Process(23, "dockerd", ["dockerd"], {}, "/")}
    monkeypatch.setattr(_daemons, "_pids", lambda: sorted(procs))
    monkeypatch.setattr(_daemons, "read_process", procs.get)
    monkeypatch.setattr(_daemons, "listener_pids", lambda path: [])
    monkeypatch.setattr(_daemons, "trust_problem", lambda proc: None)  # root's, from a root-owned executable (test__daemons.py)
    monkeypatch.setattr(_daemons, "unit_of", lambda pid: None)
    assert _daemons.dockerd_process(sock) == procs[22]
    assert _daemons.dockerd_process("/var/run/docker.sock") == procs[23]  # no -H: Docker's default socket
    monkeypatch.setattr(_daemons, "listener_pids", lambda path: [21])
    assert _daemons.dockerd_process(sock) == procs[21]  # the listener first
    # a dockerd another user runs (or one from an executable another user may write) is never believed
    monkeypatch.setattr(_daemons, "trust_problem", lambda proc: _daemons.Untrusted(proc.pid, proc.name, 1000, 1000, "/home/u/dockerd", "not root's"))
    assert _daemons.dockerd_process(sock) is None
    monkeypatch.setattr(_daemons, "listener_pids", lambda path: [])
    assert _daemons.dockerd_process(sock) is None


def test_only_a_run_on_cri_dockerd_imports_the_engines_client():
    """Every module's code imports the Docker Engine's client (and http.client) only once it is on cri-dockerd
    (docker/_names.engine_api): the other runtimes' runs do not compile or import it."""
    base = "ansible_collections.kubenode.gc.plugins.module_utils."
    code = "; ".join(["import sys, importlib"] + ["importlib.import_module(%r)" % (base + m) for m in (
        "node._node_audit", "node._node_cleanup", "gc._image_gc", "storage._disk_usage", "storage._storage_gc")] + [
        "print(sorted(m for m in sys.modules if m in ('http.client', %r, %r)))" % (base + "docker._engine", base + "docker._client")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.stdout.strip() == "[]"
    assert _engine.__name__ == base + "docker._engine"  # and engine_api gives the same module
    assert engine_api() is _engine
    assert _client.DockerApiError is DockerApiError  # the client raises the error the callers catch without importing it
