# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""containerd's own images API (containerd.services.images.v1) on the CRI client's socket and channel.

containerd serves its API and the CRI on the same unix socket, so this client borrows the CriClient's
endpoint, channel, deadline and RPC counters (counted as ``containerd.images.<Method>``). Requests
carry the containerd namespace in the ``containerd-namespace`` metadata (``k8s.io``: the CRI's
images). Knows gRPC, not Ansible; failures are CriError with one sentence.
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_images_pb2 as pb
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError, _one_line

try:
    import grpc
except ImportError:
    pass  # _cri reports the missing library (HAS_GRPC) before any call

CRI_NAMESPACE = "k8s.io"
SERVICE = "containerd.services.images.v1.Images"
# containerd's CRI reports an image pinned when one of its names carries this label (containerd >= 1.7.3)
PINNED_LABEL = "io.cri-containerd.pinned"
PINNED_VALUE = "pinned"
# the record of the pins kubenode.gc made (image_pin exclusive unpins only those)
OWNER_LABEL = "io.kubenode.gc/pinned"
OWNER_VALUE = "true"


class ContainerdImages:
    """List, get and relabel containerd image records of one namespace through a CriClient's channel."""

    def __init__(self, cri, namespace=CRI_NAMESPACE):
        self.cri = cri
        self.namespace = namespace
        self._callables = {}

    def _call(self, method, request):
        cri = self.cri
        cri._connect("containerd " + method)  # pylint: disable=protected-access
        fn = self._callables.get(method)
        if fn is None:
            desc = pb.DESCRIPTOR.services_by_name["Images"].methods_by_name[method]
            fn = self._callables[method] = cri._channel.unary_unary(  # pylint: disable=protected-access
                "/%s/%s" % (SERVICE, method),
                request_serializer=getattr(pb, desc.input_type.name).SerializeToString,
                response_deserializer=getattr(pb, desc.output_type.name).FromString,
            )
        cri._count("containerd.images." + method)  # pylint: disable=protected-access
        try:
            return fn(request, timeout=cri.timeout, metadata=(("containerd-namespace", self.namespace),))
        except grpc.RpcError as exc:
            raise self._error(method, exc) from None

    def _error(self, method, exc):
        code = exc.code() if hasattr(exc, "code") else None
        details = _one_line(exc.details() if hasattr(exc, "details") else exc) or "no details"
        endpoint = self.cri.endpoint
        if code == grpc.StatusCode.UNIMPLEMENTED:
            msg = "Endpoint %s does not serve containerd's images API (%s); is it containerd's own socket?" % (endpoint, method)
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            msg = "containerd at %s did not answer images %s within %g seconds (cri_timeout)." % (endpoint, method, self.cri.timeout)
        else:
            msg = "containerd at %s failed images %s: %s (%s)." % (endpoint, method, details, code.name if code is not None else "UNKNOWN")
        return CriError(msg, endpoint, "containerd.images." + method, code.name if code is not None else "UNKNOWN")

    def list(self, filters=()):
        """Every image record of the namespace (one record per name) matching containerd ``filters``."""
        return list(self._call("List", pb.ListImagesRequest(filters=list(filters))).images)

    def get(self, name):
        return self._call("Get", pb.GetImageRequest(name=name)).image

    def set_labels(self, record, labels):
        """Set (value) or remove (None) the given labels of an image record (from list()), leaving its other labels alone.

        The request carries the record's target: containerd's service decodes it even when the update mask names
        labels only."""
        image = pb.Image(name=record.name, labels={k: v for k, v in labels.items() if v is not None})
        image.target.CopyFrom(record.target)
        request = pb.UpdateImageRequest(image=image)
        request.update_mask.paths.extend("labels." + k for k in sorted(labels))
        return self._call("Update", request).image
