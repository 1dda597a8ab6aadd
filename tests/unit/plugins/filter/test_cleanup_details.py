# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lines under the cleanup's summary table (issue 22, item 3): sources, what went by name, the history record."""

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter.cleanup_details import CHECK_MODE_NOTE, cleanup_details
from ansible_collections.kubenode.gc.plugins.modules import image_gc

MIB = 1 << 20
SOURCES = {"high_threshold_percent": {"kind": "node", "from": "node's kubelet config /var/lib/kubelet/config.yaml"},
           "low_threshold_percent": {"kind": "node", "from": "node's kubelet config /var/lib/kubelet/config.yaml"},
           "min_age": {"kind": "variable", "from": "variable kubenode_gc_cleanup_image_min_age"},
           "max_age": {"kind": "default", "from": "kubelet default"}}


def record(n, check_mode=False):
    images = [{"id": "sha256:%d" % i, "repo_tags": ["app-%d:1" % i], "size": (i + 1) * MIB} for i in range(n)]
    return {"status": "planned" if check_mode else "cleaned", "check_mode": check_mode, "images": images,
            "history_file": "/var/lib/kubenode-gc/history/x.json",
            "policy": {"high_threshold_percent": 70, "low_threshold_percent": 60, "min_age": "0s", "max_age": "0s", "sources": SOURCES}}


def test_a_cleaned_node_names_its_sources_the_largest_images_and_its_record():
    assert cleanup_details([[record(7), "n1"], [None, "n2"], [{"status": "skipped", "reason": "below"}, "n3"]]) == [
        "n1: policy: high_threshold_percent 70%, low_threshold_percent 60% from node's kubelet config /var/lib/kubelet/config.yaml; "
        "min_age 0s from variable kubenode_gc_cleanup_image_min_age; max_age 0s from kubelet default.",
        "n1: removed 7 image(s), the largest: app-6:1 (7.0 MiB), app-5:1 (6.0 MiB), app-4:1 (5.0 MiB), app-3:1 (4.0 MiB), app-2:1 (3.0 MiB) and 2 more.",
        "n1: history record: /var/lib/kubenode-gc/history/x.json",
    ]


def test_check_mode_says_what_the_plan_is_and_writes_no_record():
    lines = cleanup_details([[record(1, check_mode=True), "n1"]])
    assert lines[1] == "n1: would remove 1 image(s), the largest: app-0:1 (1.0 MiB)."
    assert not any("history record" in line for line in lines) and lines[-1] == CHECK_MODE_NOTE
    assert "may stop earlier when the measured usage shows the low threshold reached" in CHECK_MODE_NOTE


def test_bad_input():
    with pytest.raises(AnsibleFilterError):
        cleanup_details({"n1": {}})


def test_the_image_gc_docs_keep_the_inode_sentence_whole():
    """YAML reads ' #' as a comment: the sentence once ended at '(kubernetes/kubernetes#41033,' (issue 22)."""
    text = " ".join(" ".join(yaml.safe_load(image_gc.DOCUMENTATION)["description"]).split())
    assert "(kubernetes/kubernetes issues 41033 and 32400), and only its eviction manager reacts to C(imagefs.inodesFree), by evicting pods." in text


def test_storage_gc_removals_are_named_largest_first():
    items = [{"kind": "image", "namespace": "moby", "id": "img-%d" % i, "bytes": i * MIB} for i in range(7)]
    rec = dict(record(0), storage={"supported": True, "plan": items, "removed": items[1:], "already_gone": [], "freed_bytes": 21 * MIB})
    lines = cleanup_details([[rec, "n1"]])
    assert ("n1: storage_gc removed 6 object(s): image moby/img-6 (6.0 MiB), image moby/img-5 (5.0 MiB), "
            "image moby/img-4 (4.0 MiB), image moby/img-3 (3.0 MiB), image moby/img-2 (2.0 MiB) and 1 more.") in lines
    planned = dict(record(0, check_mode=True), storage={"supported": True, "plan": items[:1], "removed": [], "freed_bytes": 0})
    assert "n1: storage_gc would remove 1 object(s): image moby/img-0 (0 B)." in cleanup_details([[planned, "n1"]])
    # the roots the module removes come first, then what containerd's collection freed, largest first
    mixed = [{"kind": "content", "namespace": "moby", "id": "sha256:l", "bytes": 9 * MIB}, {"kind": "image", "namespace": "moby", "id": "a:1", "bytes": 0}]
    done = dict(record(0), storage={"supported": True, "plan": mixed, "removed": mixed, "already_gone": [], "freed_bytes": 9 * MIB})
    assert "n1: storage_gc removed 2 object(s): image moby/a:1 (0 B), content moby/sha256:l (9.0 MiB)." in cleanup_details([[done, "n1"]])
    nothing = dict(record(0), storage={"supported": True, "plan": [], "removed": [], "freed_bytes": 0})
    assert "n1: storage_gc removed nothing." in cleanup_details([[nothing, "n1"]])
    # discard_unpacked_layers: each layer blob with the images whose manifests named it
    blobs = [{"kind": "layer_blob", "namespace": "k8s.io", "id": "sha256:b", "bytes": 2 * MIB, "images": ["app:1", "app:2"]},
             {"kind": "layer_blob", "namespace": "k8s.io", "id": "sha256:a", "bytes": 3 * MIB, "images": ["app:1"]}]
    done = dict(record(0), storage={"supported": True, "plan": blobs, "removed": blobs, "already_gone": [], "freed_bytes": 5 * MIB})
    assert ("n1: storage_gc removed 2 object(s): layer_blob k8s.io/sha256:a (3.0 MiB, of app:1), "
            "layer_blob k8s.io/sha256:b (2.0 MiB, of app:1, app:2).") in cleanup_details([[done, "n1"]])
    assert not any("storage_gc" in line for line in cleanup_details([[dict(record(0), storage={"supported": False}), "n1"]]))
