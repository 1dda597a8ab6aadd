# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""containerd's own gRPC API (namespaces, images, content, snapshots, leases, containers, sandboxes, introspection) on the CRI socket.

containerd serves its native services and the CRI on the same unix socket, so this client borrows a
CriClient's endpoint, channel, deadline and RPC counters (counted as ``containerd.<service>.<Method>``).
Every request but namespaces.List carries the namespace in the ``containerd-namespace`` metadata.
Knows gRPC, not Ansible; a failure is a ContainerdError (a CriError) of one sentence whose ``code`` is
the gRPC status name, so callers can treat ``NOT_FOUND`` as "already gone".
"""

from __future__ import annotations

import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_images_pb2 as images_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containers_pb2 as containers_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _content_pb2 as content_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _introspection_pb2 as introspection_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _leases_pb2 as leases_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _namespaces_pb2 as namespaces_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _sandbox_pb2 as sandbox_pb
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _snapshots_pb2 as snapshots_pb
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError, _one_line

try:
    import grpc
except ImportError:
    pass  # _cri reports the missing library (HAS_GRPC) before any call

CRI_NAMESPACE = "k8s.io"
# the label that gives a lease its expiry: the collector model's GC_EXPIRE, spelt here too so that this client (which
# image_gc ships and imports) does not import the model (test__client holds the two equal)
LEASE_EXPIRE = "containerd.io/gc.expire"
NAMESPACE_METADATA = "containerd-namespace"
DEFAULT_SNAPSHOTTER = "overlayfs"
SNAPSHOTTER_PLUGIN_TYPE = "io.containerd.snapshotter.v1"
# how long the transient lease of collect_garbage() lives when its removal fails (containerd then drops it itself)
SYNC_LEASE_TTL_SECONDS = 600

# service key: (generated module, proto service name, full gRPC service name)
_SERVICES = {
    "namespaces": (namespaces_pb, "Namespaces", "containerd.services.namespaces.v1.Namespaces"),
    "images": (images_pb, "Images", "containerd.services.images.v1.Images"),
    "content": (content_pb, "Content", "containerd.services.content.v1.Content"),
    "snapshots": (snapshots_pb, "Snapshots", "containerd.services.snapshots.v1.Snapshots"),
    "leases": (leases_pb, "Leases", "containerd.services.leases.v1.Leases"),
    "containers": (containers_pb, "Containers", "containerd.services.containers.v1.Containers"),
    "sandboxes": (sandbox_pb, "Store", "containerd.services.sandbox.v1.Store"),
    "introspection": (introspection_pb, "Introspection", "containerd.services.introspection.v1.Introspection"),
}


class ContainerdError(CriError):
    """A call to containerd's own API failed; str() is one sentence naming the endpoint, the call and the namespace."""


def timestamp_ns(ts):
    """A protobuf Timestamp as nanoseconds since the epoch (0 when unset)."""
    return int(ts.seconds) * 1000000000 + int(ts.nanos)


class ContainerdClient:
    """containerd's native services through a CriClient's channel (same socket, deadline and counters)."""

    def __init__(self, cri):
        self.cri = cri
        self._callables = {}

    # -- plumbing -------------------------------------------------------------

    def _callable(self, service, method):
        key = (service, method)
        fn = self._callables.get(key)
        if fn is not None:
            return fn
        module, name, full = _SERVICES[service]
        desc = module.DESCRIPTOR.services_by_name[name].methods_by_name[method]
        make = self.cri._channel.unary_stream if desc.server_streaming else self.cri._channel.unary_unary  # pylint: disable=protected-access
        fn = self._callables[key] = make(
            "/%s/%s" % (full, method),
            request_serializer=getattr(module, desc.input_type.name).SerializeToString,
            response_deserializer=_deserializer(module, desc.output_type),
        )
        return fn

    def _prepare(self, service, method, namespace):
        name = "containerd.%s.%s" % (service, method)
        self.cri._connect(name)  # pylint: disable=protected-access
        fn = self._callable(service, method)
        self.cri._count(name)  # pylint: disable=protected-access
        metadata = ((NAMESPACE_METADATA, namespace),) if namespace else None
        return fn, metadata

    def _call(self, service, method, namespace, request):
        fn, metadata = self._prepare(service, method, namespace)
        try:
            return fn(request, timeout=self.cri.timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise self._error(service, method, namespace, exc) from None

    def _stream(self, service, method, namespace, request, field):
        """All items of a server-streaming List (each response carries a batch in ``field``, or is the item when it is None)."""
        fn, metadata = self._prepare(service, method, namespace)
        items = []
        try:
            for response in fn(request, timeout=self.cri.timeout, metadata=metadata):
                if field is None:
                    items.append(response)
                else:
                    items.extend(getattr(response, field))
        except grpc.RpcError as exc:
            raise self._error(service, method, namespace, exc) from None
        return items

    def _future(self, service, method, namespace, request):
        fn, metadata = self._prepare(service, method, namespace)
        return _Future(self, service, method, namespace, fn.future(request, timeout=self.cri.timeout, metadata=metadata))

    def _error(self, service, method, namespace, exc):
        code = exc.code() if hasattr(exc, "code") else None
        name = code.name if code is not None else "UNKNOWN"
        details = _one_line(exc.details() if hasattr(exc, "details") else exc) or "no details"
        endpoint = self.cri.endpoint
        where = " in namespace %s" % namespace if namespace else ""
        what = "%s %s" % (service, method)
        if code == grpc.StatusCode.UNIMPLEMENTED:
            msg = "Endpoint %s does not serve containerd's %s API (%s); is it containerd's own socket?" % (endpoint, service, method)
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            msg = "containerd at %s did not answer %s%s within %g seconds (cri_timeout)." % (endpoint, what, where, self.cri.timeout)
        elif code == grpc.StatusCode.UNAVAILABLE:
            msg = "containerd at %s is unavailable for %s%s: %s." % (endpoint, what, where, details)
        else:
            msg = "containerd at %s failed %s%s: %s (%s)." % (endpoint, what, where, details, name)
        return ContainerdError(msg, endpoint, "containerd.%s.%s" % (service, method), name)

    # -- introspection -----------------------------------------------------------

    def snapshotters(self):
        """Names of the snapshotter plugins containerd runs (introspection Plugins; those that failed to start left out), sorted."""
        request = introspection_pb.PluginsRequest(filters=["type==%s" % SNAPSHOTTER_PLUGIN_TYPE])
        plugins = self._call("introspection", "Plugins", None, request).plugins
        return sorted(p.id for p in plugins if p.type == SNAPSHOTTER_PLUGIN_TYPE and not p.init_err.code)

    # -- namespaces -------------------------------------------------------------

    def namespaces(self):
        """Names of every containerd namespace, sorted."""
        return sorted(n.name for n in self._call("namespaces", "List", None, namespaces_pb.ListNamespacesRequest()).namespaces)

    # -- images -------------------------------------------------------------------

    def images(self, namespace):
        return list(self._call("images", "List", namespace, images_pb.ListImagesRequest()).images)

    def delete_image(self, namespace, name, sync=True):
        """Delete an image record; with ``sync`` containerd runs its garbage collection before answering."""
        self._call("images", "Delete", namespace, images_pb.DeleteImageRequest(name=name, sync=sync))

    def delete_image_async(self, namespace, name):
        """Start deleting an image record without a garbage collection; ``result()`` raises ContainerdError
        (``NOT_FOUND``: no record of that name)."""
        return self._future("images", "Delete", namespace, images_pb.DeleteImageRequest(name=name, sync=False))

    # -- content ------------------------------------------------------------------

    def content(self, namespace):
        """Info (digest, size, labels, created_at) of every blob of the namespace: one streaming call."""
        return self._stream("content", "List", namespace, content_pb.ListContentRequest(), "info")

    def remove_content_labels(self, namespace, digest, labels):
        """Remove labels of a blob in one call (content.Update with the mask ``labels.<label>`` of each and no value)."""
        request = content_pb.UpdateRequest(info=content_pb.Info(digest=digest))
        request.update_mask.paths.extend("labels." + label for label in labels)
        self._call("content", "Update", namespace, request)

    def remove_content_labels_async(self, namespace, digest, labels):
        """Start removing some labels of a blob (one content.Update whose mask names ``labels.<label>`` for each, with no
        value), leaving its other labels alone; ``result()`` raises ContainerdError (``NOT_FOUND``: no such blob)."""
        request = content_pb.UpdateRequest(info=content_pb.Info(digest=digest))
        request.update_mask.paths.extend("labels." + label for label in labels)
        return self._future("content", "Update", namespace, request)

    def delete_content(self, namespace, digest):
        self._call("content", "Delete", namespace, content_pb.DeleteContentRequest(digest=digest))

    def ingests(self, namespace):
        """Status (ref, offset, total, started_at, updated_at) of every ingest (partial download) of the namespace."""
        return list(self._call("content", "ListStatuses", namespace, content_pb.ListStatusesRequest()).statuses)

    def abort_ingest(self, namespace, ref):
        self._call("content", "Abort", namespace, content_pb.AbortRequest(ref=ref))

    # -- snapshots ------------------------------------------------------------------

    def snapshots(self, namespace, snapshotter=DEFAULT_SNAPSHOTTER):
        return self._stream("snapshots", "List", namespace, snapshots_pb.ListSnapshotsRequest(snapshotter=snapshotter), "info")

    def usage_async(self, namespace, snapshotter, key):
        """Start one Usage call; ``result()`` gives the UsageResponse (size, inodes) or raises ContainerdError."""
        return self._future("snapshots", "Usage", namespace, snapshots_pb.UsageRequest(snapshotter=snapshotter, key=key))

    def remove_snapshot_labels(self, namespace, snapshotter, key, labels):
        """Remove labels of a snapshot in one call (snapshots.Update with the mask ``labels.<label>`` of each and no value)."""
        request = snapshots_pb.UpdateSnapshotRequest(snapshotter=snapshotter, info=snapshots_pb.Info(name=key))
        request.update_mask.paths.extend("labels." + label for label in labels)
        self._call("snapshots", "Update", namespace, request)

    def remove_snapshot(self, namespace, snapshotter, key):
        self._call("snapshots", "Remove", namespace, snapshots_pb.RemoveSnapshotRequest(snapshotter=snapshotter, key=key))

    # -- leases ---------------------------------------------------------------------------

    def leases(self, namespace):
        return list(self._call("leases", "List", namespace, leases_pb.ListRequest()).leases)

    def lease_resources(self, namespace, lease_id):
        return list(self._call("leases", "ListResources", namespace, leases_pb.ListResourcesRequest(id=lease_id)).resources)

    def create_lease(self, namespace, lease_id, labels=None):
        self._call("leases", "Create", namespace, leases_pb.CreateRequest(id=lease_id, labels=labels or {}))

    def delete_lease(self, namespace, lease_id, sync=True):
        """Delete a lease; with ``sync`` containerd runs its garbage collection before answering."""
        self._call("leases", "Delete", namespace, leases_pb.DeleteRequest(id=lease_id, sync=sync))

    def collect_garbage(self, namespace, lease_prefix):
        """Run containerd's garbage collection now and wait for it to end: a transient lease (``lease_prefix`` + pid and
        time, expiring by itself should its removal fail) deleted with ``sync``. The one way kubenode.gc triggers a
        collection after removals made without one (storage_gc, image_gc's native removals)."""
        lease_id = "%s%d-%d" % (lease_prefix, os.getpid(), time.time_ns())
        expire = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + SYNC_LEASE_TTL_SECONDS))
        self.create_lease(namespace, lease_id, {LEASE_EXPIRE: expire})
        self.delete_lease(namespace, lease_id, sync=True)

    # -- containers -----------------------------------------------------------------------

    def containers(self, namespace):
        """Every container record of the namespace (ListStream: one message per container)."""
        return [m.container for m in self._stream("containers", "ListStream", namespace, containers_pb.ListContainersRequest(), None)]

    # -- sandboxes --------------------------------------------------------------------------

    def sandboxes(self, namespace):
        """Every sandbox record (id, labels) of the namespace; none on a containerd without the sandbox store (1.6)."""
        try:
            return list(self._call("sandboxes", "List", namespace, sandbox_pb.StoreListRequest()).list)
        except ContainerdError as exc:
            if exc.code == "UNIMPLEMENTED":
                return []
            raise


def _deserializer(module, message):
    """The response parser of a method: its message class, or nothing for google.protobuf.Empty (not in the module)."""
    if message.full_name == "google.protobuf.Empty":
        return bytes  # the raw (empty) answer: gRPC takes a None result for a failed deserialization
    return getattr(module, message.name).FromString


class _Future:
    def __init__(self, client, service, method, namespace, future):
        self._args = (client, service, method, namespace)
        self._future = future

    def done(self):
        return self._future.done()

    def result(self):
        try:
            return self._future.result()
        except grpc.RpcError as exc:
            client, service, method, namespace = self._args
            raise client._error(service, method, namespace, exc) from None  # pylint: disable=protected-access
