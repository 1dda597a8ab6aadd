# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark (not a test): prune N images with image_gc against the raw RPC floor, on a real runtime.

    python -m benchmarks.image_gc_prune [--images 500] [--parallelism 8] [--runtime containerd-1.6|containerd-1.7|containerd-2|crio]

Same run, same runtime (containerd 1.6 by default):
1. import N images and remove them with one RemoveImage call at a time (the floor a
   sequential client such as the kubelet pays), timing only the calls;
2. import N other images and run image_gc's executor in prune mode, timing the whole run
   (node read, ledger, plan, batched removals with container re-lists).
Prints both times, their ratio, and the module's RPC counts. Run as root (tmpfs, the runtime).
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from devtools.collection import make_importable  # noqa: E402  pylint: disable=wrong-import-position

make_importable()

from devtools import runtimes  # noqa: E402  pylint: disable=wrong-import-position
from devtools.images import ImageSpec  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubenode.gc.plugins.module_utils import _image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from ansible_collections.kubenode.gc.plugins.modules import image_gc  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--runtime", default=runtimes.DEFAULT, choices=runtimes.NAMES)
    args = parser.parse_args()
    n = args.images

    with runtimes.make(args.runtime, imagefs_size="1G") as ctrd:
        ctrd.import_images([ImageSpec("bench-raw-%04d:1" % i) for i in range(n)])
        ids = [img.id for img in ctrd.client.list_images() if img.repo_tags[0].startswith("docker.io/library/bench-raw-")]
        start = time.perf_counter()
        for image_id in ids:
            ctrd.client.remove_image(image_id)
        raw = time.perf_counter() - start

        ctrd.import_images([ImageSpec("bench-gc-%04d:1" % i) for i in range(n)])
        client = type(ctrd.client)(ctrd.endpoint)
        with tempfile.TemporaryDirectory() as tmp:
            opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s", ledger_path=os.path.join(tmp, "ledger.json"),
                                                parallelism=args.parallelism))
            start = time.perf_counter()
            result = _image_gc.run(client, opts)
            module = time.perf_counter() - start
        left = len(ctrd.client.list_images())

    print("images removed            : %d sequentially, %d by image_gc (%d left: the sandbox image)" % (len(ids), len(result["removed"]), left))
    print("raw sequential RemoveImage: %7.2f s  (%.1f ms per image)" % (raw, raw * 1000 / max(1, len(ids))))
    print("image_gc prune (whole run): %7.2f s  (%.1f ms per image, parallelism %d)" % (module, module * 1000 / max(1, n), args.parallelism))
    print("ratio image_gc / raw floor: %7.2f" % (module / raw if raw else float("nan")))
    print("image_gc rpc_calls        : %s" % dict(sorted(client.rpc_calls.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
