# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.node_audit on every real runtime: one execution holds what each single-purpose module returns on its own,
changes nothing, and fails with cri_info's sentence when the runtime cannot be read (issue 25, item 1)."""

import os

import pytest

from devtools.images import ImageSpec

pytestmark = pytest.mark.runtimes("one")

KUBELET = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\n"


def ids(items, key="id"):
    return sorted(str(item[key] if isinstance(item, dict) else getattr(item, key)) for item in items or [])


@pytest.mark.runtimes("every")
def test_node_audit_holds_what_each_module_returns(ansible, runtime, tmp_path):
    runtime.pull_images([ImageSpec("registry.k8s.io/audit-used:1", size=64 << 10), ImageSpec("registry.k8s.io/audit-unused:1", size=64 << 10)])
    pod = runtime.run_pod("audit", namespace="audit-ns")
    runtime.add_container(pod, "used", "registry.k8s.io/audit-used:1")
    runtime.add_container(pod, "dead", "registry.k8s.io/audit-used:1", state="exited")
    kubelet = tmp_path / "kubelet.yaml"
    kubelet.write_text(KUBELET)
    (tmp_path / "root" / "image_manager" / "pulled" / "a").mkdir(parents=True)
    (tmp_path / "root" / "image_manager" / "pulled" / "a" / "record").write_text("{}")
    flags = tmp_path / "kubeadm-flags.env"
    flags.write_text('KUBELET_KUBEADM_ARGS="--root-dir=%s"\n' % (tmp_path / "root"))
    ledger = str(tmp_path / "ledger.json")
    kind = {"cri-o": "crio", "docker": "docker"}.get(runtime.kind, "containerd")
    images_before = ids(runtime.client.list_images())
    containers_before = ids(runtime.client.list_containers())

    res = ansible.module("kubenode.gc.node_audit", dict(
        cri_endpoint=runtime.endpoint,
        kubelet_config=dict(path=str(kubelet), settings=dict(imageGCHighThresholdPercent=85), flag_files=[str(flags)]),
        runtime_config={kind: dict(path=runtime.config_path, settings={}), "crio" if kind == "containerd" else "containerd": dict(path=None)},
        image_gc=dict(ledger_path=ledger, free_bytes_high=None),
        image_gc_overrides=dict(kubenode_gc_cleanup_image_min_age="0s"),
        keep_images=["registry.k8s.io/audit-keep:*"],
        container_gc=dict(pod_logs_dir=runtime.pod_logs, min_age="0s", max_per_pod_container=0),
        disk_usage=dict(pod_logs_dir=runtime.pod_logs, kubelet_root_dir=str(tmp_path / "root")),
        kubelet_root_dir=str(tmp_path / "root")), check=False)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    audit = res["audit"]

    # each part is what its module returns on its own (check mode, the same options)
    cri = ansible.module("kubenode.gc.cri_info", dict(cri_endpoint=runtime.endpoint, gather=["runtime", "imagefs", "images", "containers"]))
    assert ids(audit["cri_info"]["images"]) == ids(cri["images"]) == images_before
    assert ids(audit["cri_info"]["containers"]) == ids(cri["containers"]) == containers_before
    assert audit["cri_info"]["runtime"] == cri["runtime"]
    kcfg = ansible.module("kubenode.gc.kubelet_config", dict(path=str(kubelet), flag_files=[str(flags)]))
    assert audit["kubelet_config"]["effective"] == kcfg["effective"]
    drift = ansible.module("kubenode.gc.kubelet_config", dict(path=str(kubelet), flag_files=[str(flags)],
                                                              settings=dict(imageGCHighThresholdPercent=85)), check=True)
    assert audit["kubelet_config_drift"]["changed"] is True and drift["changed"] is True
    assert audit["kubelet_config_drift"].get("changes") == drift.get("changes")
    assert audit["runtime_config"]["runtime"] == kind and audit["runtime_config_drift"]["changed"] is False
    # the policy plan: the node's own kubelet thresholds (70/60) with the variable's min_age, as the cleanup decides it
    policy = ansible.module("kubenode.gc.image_gc", dict(cri_endpoint=runtime.endpoint, high_threshold_percent=70, low_threshold_percent=60,
                                                         min_age="0s", ledger_path=ledger, keep_images=["registry.k8s.io/audit-keep:*"]), check=True)
    assert ids(audit["image_gc_policy"]["removed"]) == ids(policy["removed"])
    assert audit["image_gc_policy"]["usage_before"] == policy["usage_before"]
    prune = ansible.module("kubenode.gc.image_gc", dict(cri_endpoint=runtime.endpoint, mode="prune", min_age="0s", ledger_path=ledger,
                                                        keep_images=["registry.k8s.io/audit-keep:*"]), check=True)
    assert ids(audit["image_gc_prune"]["removed"]) == ids(prune["removed"])
    assert any("registry.k8s.io/audit-unused:1" in r["repo_tags"] for r in audit["image_gc_prune"]["removed"])
    assert not any("registry.k8s.io/audit-used:1" in r["repo_tags"] for r in audit["image_gc_prune"]["removed"])
    cgc = ansible.module("kubenode.gc.container_gc", dict(cri_endpoint=runtime.endpoint, pod_logs_dir=runtime.pod_logs, min_age="0s", max_per_pod_container=0,
                                                          ), check=True)
    assert ids(audit["container_gc"]["removed_containers"]) == ids(cgc["removed_containers"]) and audit["container_gc"]["removed_containers"]
    assert set(audit["disk_usage"]["categories"]) >= {"k8s_images", "writable_layers", "container_logs", "unaccounted"}
    assert [os.path.basename(f["path"]) for f in audit["credential_records"]["files"]] == ["record"]
    st = os.statvfs(str(tmp_path))
    block, blocks, _avail, inodes, _free = (int(v) for v in audit["nodefs"].split())
    assert (block, blocks, inodes) == (st.f_frsize, st.f_blocks, st.f_files)
    assert audit["gc_timer"] == {"installed": False, "state": ""}
    # containerd before 1.7.3 cannot pin: no image_pin part there; elsewhere the keep pattern matches nothing to pin
    assert audit["image_pin"] is None or audit["image_pin"]["changed"] is False
    # nothing changed: every image and container is still there, and the planned removals were only planned
    assert ids(runtime.client.list_images()) == images_before
    assert ids(runtime.client.list_containers()) == containers_before
    assert kubelet.read_text() == KUBELET


def test_node_audit_fails_with_cri_info_sentence(ansible, runtime, tmp_path):
    res = ansible.module("kubenode.gc.node_audit", dict(cri_endpoint="unix://" + str(tmp_path / "nothing.sock"), cri_timeout=2))
    assert res.get("failed") and res["changed"] is False
    assert res["msg"] == res["audit"]["cri_info"]["msg"] and "nothing.sock" in res["msg"]
    assert set(res["audit"]) == {"cri_info"}


def test_node_audit_refuses_bad_options_before_reading(ansible, runtime, tmp_path):
    for args, words in (
        (dict(container_gc=dict(min_age="two minutes")), ("two minutes",)),
        (dict(image_gc=dict(mode="prune")), ("image_gc.mode", "node_audit")),
        (dict(runtime_config=dict(podman={})), ("runtime_config", "podman")),
        (dict(container_gc=dict(bogus=1)), ("container_gc", "bogus")),
    ):
        res = ansible.module("kubenode.gc.node_audit", dict(args, cri_endpoint=runtime.endpoint))
        assert res.get("failed"), args
        assert all(w in res["msg"] for w in words), res["msg"]
        assert "audit" not in res


def test_node_audit_summary_lines_are_the_full_lists(ansible, runtime, tmp_path):
    """detail=summary: one line per image the runtime holds, its size and marks as the full lists say (issue 25)."""
    runtime.pull_images([ImageSpec("registry.k8s.io/sum-used:1", size=64 << 10), ImageSpec("registry.k8s.io/sum-unused:1", size=64 << 10)])
    pod = runtime.run_pod("summary", namespace="sum-ns")
    runtime.add_container(pod, "used", "registry.k8s.io/sum-used:1")
    args = dict(cri_endpoint=runtime.endpoint, image_gc=dict(ledger_path=str(tmp_path / "ledger.json")),
                image_gc_overrides=dict(kubenode_gc_cleanup_image_min_age="0s"),
                container_gc=dict(pod_logs_dir=runtime.pod_logs), disk_usage=dict(pod_logs_dir=runtime.pod_logs, kubelet_root_dir=str(tmp_path)),
                kubelet_root_dir=str(tmp_path))
    full = ansible.module("kubenode.gc.node_audit", args)["audit"]
    res = ansible.module("kubenode.gc.node_audit", dict(args, detail="summary"))
    assert not res.get("failed"), res.get("msg")
    summary = res["audit"]["summary"]
    assert summary["image_columns"] == ["id", "ref", "size", "marks"]
    assert "images" not in res["audit"]["cri_info"] and "removed" not in res["audit"]["image_gc_prune"]
    assert "removed" not in res["audit"]["image_gc_policy"]
    lines = {line.split(" ")[0]: line.split(" ") for line in summary["images"]}
    images = {i.id: i for i in runtime.client.list_images()}
    assert sorted(lines) == sorted(images) == ids(full["cri_info"]["images"])
    prune = {r["id"] for r in full["image_gc_prune"]["removed"]}
    policy = {r["id"] for r in full["image_gc_policy"]["removed"]}
    assert prune  # the policy plan's (g) follow it the same way, and are usually none on a test runtime's imagefs
    for image in full["cri_info"]["images"]:
        _id, ref, size, marks = lines[image["id"]]
        assert int(size) == image["size"] == int(images[image["id"]].size)
        assert ref == sorted(image["repo_tags"])[0] if image["repo_tags"] else ref.endswith(":<none>")
        assert ("u" in marks) == image["in_use"] and ("s" in marks) == image["sandbox_image"] and ("p" in marks) == image["pinned"]
        assert ("r" in marks) == (image["id"] in prune) and ("g" in marks) == (image["id"] in policy) and "n" not in marks
    used = next(line for line in summary["images"] if " registry.k8s.io/sum-used:1 " in line)
    unused = next(line for line in summary["images"] if " registry.k8s.io/sum-unused:1 " in line)
    assert "u" in used.rsplit(" ", 1)[1] and "r" not in used.rsplit(" ", 1)[1] and "r" in unused.rsplit(" ", 1)[1]
