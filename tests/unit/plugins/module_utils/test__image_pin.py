# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""image_pin: the pure policy, the options, and the containerd images client on the wire."""

import grpc
import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_images
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_images_pb2 as pb
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _image_pin_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import keep_matcher
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_pin
from ansible_collections.kubenode.gc.plugins.modules import image_pin

PIN = dict(pinned_label="io.cri-containerd.pinned", pinned_value="pinned", owner_label="io.kubenode.gc/pinned", owner_value="true")


def image(i, tags, pinned=False, digests=()):
    return {"id": "sha256:%064x" % i, "repo_tags": list(tags), "repo_digests": list(digests), "pinned": pinned}


@pytest.mark.parametrize("name, version, kind", [
    ("containerd", "1.6.20~ds1", None),
    ("containerd", "v1.7.2", None),
    ("containerd", "1.7.3", "containerd"),
    ("containerd", "1.7.24~ds1", "containerd"),
    ("containerd", "2.1.9~ds1", "containerd"),
    ("containerd", "garbage", None),
    ("cri-o", "1.37.0", "crio"),
    ("docker", "28.0.0", None),
])
def test_runtime_kind(name, version, kind):
    got, reason = policy.runtime_kind(name, version)
    assert got == kind
    assert (reason is None) == (kind is not None)
    if reason:
        assert reason.endswith("nothing was changed.") and reason.count(". ") == 0


def test_plan_containerd_pins_unpinned_matches_on_every_record_and_leaves_others_pins():
    a = image(1, ["registry.k8s.io/a:1"], digests=["registry.k8s.io/a@sha256:" + "1" * 64])
    b = image(2, ["registry.k8s.io/b:1"], pinned=True)  # pinned by the runtime's config
    c = image(3, ["docker.io/library/c:1"])
    d = image(4, ["docker.io/library/d:1"])
    records = {"registry.k8s.io/a:1": {}, "registry.k8s.io/a@sha256:" + "1" * 64: {}, a["id"]: {}, "registry.k8s.io/b:1": {},
               "docker.io/library/c:1": {"io.cri-containerd.pinned": "pinned", "io.kubenode.gc/pinned": "true"},
               "docker.io/library/d:1": {"io.cri-containerd.pinned": "pinned"}}
    pin, unpin = policy.plan_containerd([a, b, c, d], records, keep_matcher(["registry.k8s.io/*"]), True, **PIN)
    assert [(i["id"], names) for i, names in pin] == [(a["id"], ["registry.k8s.io/a:1", "registry.k8s.io/a@sha256:" + "1" * 64, a["id"]])]
    assert [(i["id"], names) for i, names in unpin] == [(c["id"], ["docker.io/library/c:1"])]  # d: someone else's pin
    _pin, unpin = policy.plan_containerd([a, b, c, d], records, keep_matcher(["registry.k8s.io/*"]), False, **PIN)
    assert unpin == []


def test_plan_crio_owns_only_what_it_pinned():
    pause = image(1, ["registry.k8s.io/pause:3.10"], pinned=True)
    a = image(2, ["registry.k8s.io/a:1"])
    old = image(3, ["docker.io/library/old:1"], pinned=True)
    owned, pinned, unpinned = policy.plan_crio([pause, a, old], keep_matcher(["registry.k8s.io/*"]), ["docker.io/library/old:1"], [], False)
    assert (owned, pinned, unpinned) == (["docker.io/library/old:1", "registry.k8s.io/a:1"], [a], [])
    owned, pinned, unpinned = policy.plan_crio([pause, a, old], keep_matcher(["registry.k8s.io/*"]), ["docker.io/library/old:1"], [], True)
    assert (owned, pinned, unpinned) == (["registry.k8s.io/a:1"], [a], [old])


def test_crio_dropin_carries_others_over_and_records_ours():
    text = policy.crio_dropin_text(["registry.k8s.io/a:1"], ["quay.io/x:1"])
    assert text == ('# Managed by kubenode.gc.image_pin; rewritten on every run, do not edit.\n'
                    '# kubenode.gc pins: ["registry.k8s.io/a:1"]\n'
                    '[crio.image]\npinned_images = [\n  "quay.io/x:1",\n  "registry.k8s.io/a:1",\n]\n')
    assert policy.crio_owned(text) == ["registry.k8s.io/a:1"]
    assert policy.crio_owned(None) == [] and policy.crio_owned("# kubenode.gc pins: {bad") == []
    import tomllib
    assert tomllib.loads(text)["crio"]["image"]["pinned_images"] == ["quay.io/x:1", "registry.k8s.io/a:1"]


@pytest.mark.parametrize("overrides, message", [
    (dict(images=[""]), "images must not contain an empty pattern; remove it or name the image to keep."),
    (dict(crio_dropin="relative.conf"), "crio_dropin must be an absolute path, got 'relative.conf'."),
    (dict(lock_timeout=float("nan")), "lock_timeout must be a finite number of seconds, 0 or more, got nan."),
])
def test_bad_options_fail_in_one_sentence(overrides, message):
    with pytest.raises(OptionError) as err:
        _image_pin.options(params_for(image_pin.ARGUMENT_SPEC, **overrides))
    assert str(err.value) == message


def test_images_client_sends_namespace_mask_and_target(grpc_server, cri_client):
    seen = {}

    def reply(request, context):
        seen["metadata"] = dict(context.invocation_metadata())
        seen["request"] = pb.UpdateImageRequest.FromString(request)
        return pb.UpdateImageResponse(image=seen["request"].image).SerializeToString()

    server = grpc_server(handlers=(grpc.method_handlers_generic_handler("containerd.services.images.v1.Images", {
        "Update": grpc.unary_unary_rpc_method_handler(reply, request_deserializer=None, response_serializer=None)}),))
    record = pb.Image(name="registry.k8s.io/a:1", labels={"keep": "me"}, target=pb.Descriptor(media_type="m", digest="sha256:" + "1" * 64, size=3))
    client = cri_client(server.endpoint)
    _containerd_images.ContainerdImages(client).set_labels(record, {"io.cri-containerd.pinned": "pinned", "io.kubenode.gc/pinned": None})
    assert client.rpc_calls == {"containerd.images.Update": 1}
    assert seen["metadata"]["containerd-namespace"] == "k8s.io"
    request = seen["request"]
    assert list(request.update_mask.paths) == ["labels.io.cri-containerd.pinned", "labels.io.kubenode.gc/pinned"]
    assert dict(request.image.labels) == {"io.cri-containerd.pinned": "pinned"}  # a removed label is masked but absent
    assert (request.image.name, request.image.target) == (record.name, record.target)


def test_images_client_on_a_socket_without_the_images_api(grpc_server, cri_client):
    record = pb.Image(name="registry.k8s.io/a:1")
    server = grpc_server()
    with pytest.raises(CriError) as err:
        _containerd_images.ContainerdImages(cri_client(server.endpoint)).list()
    assert str(err.value) == "Endpoint %s does not serve containerd's images API (List); is it containerd's own socket?" % server.endpoint
    assert record.name


def test_images_proto_matches_upstream_field_numbers():
    """containerd api/services/images/v1/images.proto and api/types/descriptor.proto."""
    fields = {
        "Image": {"name": 1, "labels": 2, "target": 3},
        "Descriptor": {"media_type": 1, "digest": 2, "size": 3},
        "UpdateImageRequest": {"image": 1, "update_mask": 2},
        "ListImagesRequest": {"filters": 1},
        "ListImagesResponse": {"images": 1},
        "GetImageRequest": {"name": 1},
        "GetImageResponse": {"image": 1},
        "DeleteImageRequest": {"name": 1, "sync": 2},
    }
    for message, numbers in fields.items():
        desc = pb.DESCRIPTOR.message_types_by_name[message]
        assert {f.name: f.number for f in desc.fields} == numbers
    assert pb.DESCRIPTOR.package == "containerd.services.images.v1"
    assert sorted(pb.DESCRIPTOR.services_by_name["Images"].methods_by_name) == ["Delete", "Get", "List", "Update"]
