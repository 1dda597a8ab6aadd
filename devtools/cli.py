# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Command line for the embedded runtimes, used by the demo.

  python -m devtools.cli up   --workdir DIR [--imagefs-size 256M] [--runtime containerd-1.6|containerd-1.7|containerd-2.1|crio|cri-dockerd]
  python -m devtools.cli fill --workdir DIR
  python -m devtools.cli down --workdir DIR
  python -m devtools.cli collections-path
  python -m devtools.cli node-image [--json] [RUNTIME...]
                         (builds the node images when missing, in parallel; prints their names, one a line,
                          or with --json {runtime: image}; RUNTIME: containerd-1.6 (default), containerd-1.7,
                          containerd-2.1, crio, cri-dockerd)
  python -m devtools.cli crio-dir         (prints the cri-o binaries' directory, nothing when there is none)

``up`` leaves the runtime running in the background and prints its endpoint.
"""

import argparse
import json
import sys

from .collection import make_importable
from .images import ImageSpec

MIB = 1 << 20


def fill_demo(rt):
    """Sample node: images of several sizes (some sharing a base layer), pods with containers in every state."""
    specs = [
        ImageSpec("registry.example/shop/frontend:2.4.1", size=6 * MIB),
        ImageSpec("registry.example/shop/frontend:2.3.0", size=6 * MIB),
        ImageSpec("registry.example/shop/cart:1.9", size=4 * MIB, share_base=False),
        ImageSpec("registry.example/shop/cart:1.8", size=4 * MIB, share_base=False),
        ImageSpec("registry.example/batch/report:2026.10", size=8 * MIB),
        ImageSpec("registry.example/batch/report:2026.09", size=8 * MIB),
        ImageSpec("registry.k8s.io/coredns/coredns:v1.11.1", size=3 * MIB),
        ImageSpec("docker.io/library/busybox:1.36", size=1 * MIB),
        ImageSpec("quay.io/example/debug-tools:latest", size=10 * MIB, share_base=False),
    ]
    rt.import_images(specs)
    shop = rt.run_pod("frontend-7d9f", namespace="shop", uid="1f6c1a4e-shop-frontend")
    rt.add_container(shop, "frontend", "registry.example/shop/frontend:2.4.1", "running")
    rt.add_container(shop, "cart", "registry.example/shop/cart:1.9", "running")
    dns = rt.run_pod("coredns-5dd5", namespace="kube-system", uid="7a0e2c11-kube-coredns")
    rt.add_container(dns, "coredns", "registry.k8s.io/coredns/coredns:v1.11.1", "running")
    job = rt.run_pod("report-28810", namespace="batch", uid="c3b9d8f2-batch-report")
    for attempt in range(3):
        rt.add_container(job, "report", "registry.example/batch/report:2026.10", "exited", attempt=attempt)
    rt.add_container(job, "uploader", "docker.io/library/busybox:1.36", "created")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m devtools.cli", description="Embedded container runtimes for the kubenode.gc demo and tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "fill", "down"):
        p = sub.add_parser(name)
        p.add_argument("--workdir", required=True)
        if name == "up":
            p.add_argument("--imagefs-size", default="256M")
            p.add_argument("--runtime", default="containerd-1.6", help="containerd-1.6 (default), containerd-1.7, containerd-2.1, crio or cri-dockerd")
    sub.add_parser("collections-path")
    p = sub.add_parser("node-image")
    p.add_argument("--json", action="store_true")
    p.add_argument("runtimes", nargs="*", metavar="RUNTIME")
    sub.add_parser("crio-dir")
    args = parser.parse_args(argv)

    collections_path = make_importable()
    from . import runtimes  # pylint: disable=import-outside-toplevel  # needs make_importable()

    if args.command == "collections-path":
        print(collections_path)
    elif args.command == "node-image":
        from .nodes import DEFAULT_RUNTIME, node_images  # pylint: disable=import-outside-toplevel

        runtimes = args.runtimes or [DEFAULT_RUNTIME]
        images = node_images(runtimes)
        print(json.dumps(images) if args.json else "\n".join(images[runtime] for runtime in runtimes))
    elif args.command == "crio-dir":
        from .fetch import crio_dir  # pylint: disable=import-outside-toplevel

        print(crio_dir() or "")
    elif args.command == "up":
        rt = runtimes.make(args.runtime, workdir=args.workdir, imagefs_size=args.imagefs_size)
        rt.start()
        rt.save()
        print(rt.endpoint)
    elif args.command == "fill":
        fill_demo(runtimes.attach(args.workdir))
    elif args.command == "down":
        runtimes.attach(args.workdir).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
