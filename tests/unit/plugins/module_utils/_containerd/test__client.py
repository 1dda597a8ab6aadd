# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""containerd's native API client against a real in-process gRPC server: wire names, counting, errors, field numbers."""

import grpc
import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_images_pb2 as images_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _client
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _content_pb2 as content_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _leases_pb2 as leases_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _snapshots_pb2 as snapshots_pb


def test_calls_are_counted_and_empty_answers_accepted(grpc_server, cri_client):
    statuses = content_pb.ListStatusesResponse(statuses=[content_pb.Status(ref="r1", offset=5, total=9)]).SerializeToString()
    cri = cri_client(grpc_server({"ListStatuses": ("reply", statuses), "Abort": ("reply", b"")}).endpoint)
    api = _client.ContainerdClient(cri)
    assert [(s.ref, s.offset, s.total) for s in api.ingests("default")] == [("r1", 5, 9)]
    api.abort_ingest("default", "r1")
    assert cri.rpc_calls == {"containerd.content.ListStatuses": 1, "containerd.content.Abort": 1}


def test_not_found_keeps_its_code_in_one_sentence(grpc_server, cri_client):
    server = grpc_server({"Remove": ("abort", (grpc.StatusCode.NOT_FOUND, "snapshot x:\nnot found"))})
    api = _client.ContainerdClient(cri_client(server.endpoint))
    with pytest.raises(_client.ContainerdError) as err:
        api.remove_snapshot("default", "overlayfs", "x")
    assert err.value.code == "NOT_FOUND"
    assert str(err.value) == ("containerd at %s failed snapshots Remove in namespace default: snapshot x: not found (NOT_FOUND)."
                              % server.endpoint)


def test_not_containerd_says_so(grpc_server, cri_client):
    api = _client.ContainerdClient(cri_client(grpc_server().endpoint))
    with pytest.raises(_client.ContainerdError) as err:
        api.namespaces()
    assert "does not serve containerd's namespaces API (List)" in str(err.value) and "\n" not in str(err.value)


def test_deadline_names_cri_timeout(grpc_server, cri_client):
    server = grpc_server({"List": ("sleep", 2)})
    api = _client.ContainerdClient(cri_client(server.endpoint, timeout=0.3))
    with pytest.raises(_client.ContainerdError) as err:
        api.leases("moby")
    assert str(err.value) == "containerd at %s did not answer leases List in namespace moby within 0.3 seconds (cri_timeout)." % server.endpoint


def test_packages_and_field_numbers_are_upstreams():
    """Field numbers (not names) go on the wire; spot-check them against containerd's api/services/*/v1."""
    checks = [
        (content_pb, "containerd.services.content.v1", {"Info": {"digest": 1, "size": 2, "created_at": 3, "updated_at": 4, "labels": 5},
                                                        "Status": {"started_at": 1, "updated_at": 2, "ref": 3, "offset": 4, "total": 5,
                                                                   "expected": 6}}),
        (snapshots_pb, "containerd.services.snapshots.v1", {"Info": {"name": 1, "parent": 2, "kind": 3, "created_at": 4, "labels": 6},
                                                            "UsageResponse": {"size": 1, "inodes": 2},
                                                            "ListSnapshotsRequest": {"snapshotter": 1, "filters": 2}}),
        (leases_pb, "containerd.services.leases.v1", {"Lease": {"id": 1, "created_at": 2, "labels": 3}, "DeleteRequest": {"id": 1, "sync": 2},
                                                      "CreateRequest": {"id": 1, "labels": 3}, "Resource": {"id": 1, "type": 2}}),
        (images_pb, "containerd.services.images.v1", {"DeleteImageRequest": {"name": 1, "sync": 2}}),
    ]
    for module, package, messages in checks:
        assert module.DESCRIPTOR.package == package
        for name, numbers in messages.items():
            desc = module.DESCRIPTOR.message_types_by_name[name]
            assert {f.name: f.number for f in desc.fields if f.name in numbers} == numbers
    stream = snapshots_pb.DESCRIPTOR.services_by_name["Snapshots"].methods_by_name["List"]
    assert stream.server_streaming
