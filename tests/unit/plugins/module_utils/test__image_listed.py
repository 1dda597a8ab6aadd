# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""image_gc mode=listed: the pure plan (_image_policy.listed_pass), its options and what the result says of the images kept."""

from types import SimpleNamespace

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import keep_matcher, patterns_matching
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc as gc
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_policy as policy

SECOND = 10**9
T = 1_700_000_000 * SECOND
BAD = "sha256:" + "b" * 64


def image(image_id, tags=(), digests=(), size=1024, **flags):
    img = {"id": image_id, "repo_tags": list(tags), "repo_digests": list(digests), "size": size, "pinned": False, "in_use": False,
           "sandbox_image": False, "used_by": []}
    img.update(flags)
    return img


NODE = [
    image(BAD, ["docker.io/library/bad:1", "docker.io/library/bad-alias:2"], ["docker.io/library/bad@sha256:" + "d" * 64], size=5000),
    image("sha256:" + "1" * 64, ["docker.io/library/bad:run"], in_use=True, used_by=["c-run"]),
    image("sha256:" + "2" * 64, ["docker.io/library/bad:exited"], in_use=True, used_by=["c-exited"]),
    image("sha256:" + "3" * 64, ["registry.k8s.io/pause:3.10"], sandbox_image=True, pinned=True),
    image("sha256:" + "4" * 64, ["registry.k8s.io/bad:1"]),
    image("sha256:" + "5" * 64, ["docker.io/library/good:1"]),
    image("sha256:" + "6" * 64, ["docker.io/library/bad:pinned"], pinned=True),
]


def plan(images, patterns, keep=(), max_removals=None, min_age=3600 * SECOND, high=85, capacity=100, available=90):
    records = {i["id"]: {"first_detected": T, "last_used": 0, "last_possible_use": T} for i in images}
    opts = policy.PlanOptions("listed", high, 80, min_age, 0, keep=keep_matcher(list(keep)), max_removals=max_removals,
                              listed=keep_matcher(patterns))
    return policy.plan(images, records, opts, T, capacity, available)


def test_listed_removes_every_named_unprotected_image_whatever_usage_and_ages():
    # usage 10 %, far below the thresholds; every image first seen now, younger than min_age: neither matters
    result = plan(NODE, ["bad", "*/bad:*", "registry.k8s.io/*", "docker.io/library/bad-alias:2"], keep=["registry.k8s.io/bad:*"])
    assert [i["id"] for i in result.removals] == [BAD]
    assert [(i["id"][7:8], reason) for i, reason in result.listed_kept] == [
        ("1", "in_use"), ("2", "in_use"), ("3", "sandbox"), ("4", "keep_list"), ("6", "pinned")]
    assert result.kept == {"in_use": 2, "pinned": 1, "sandbox": 1, "keep_list": 1, "too_young": 0, "recently_used": 0, "not_needed": 1}
    assert result.usage_before == 10


@pytest.mark.parametrize("pattern", ["docker.io/library/bad@sha256:" + "d" * 64, "bad@sha256:" + "d" * 64, BAD, "b" * 12, "bad-alias:2",
                                     "docker.io/library/bad*"])
def test_an_image_is_named_by_digest_id_short_id_any_tag_or_glob(pattern):
    assert [i["id"] for i in plan(NODE, [pattern]).removals] == [BAD]


def test_patterns_naming_nothing_remove_nothing_and_max_removals_caps():
    assert plan(NODE, ["nothing:*"]).removals == []
    assert plan(NODE, ["nothing:*"]).kept["not_needed"] == 3
    two = [image("sha256:%064d" % n, ["docker.io/library/bad:%d" % n]) for n in range(3)]
    capped = plan(two, ["bad:*"], max_removals=2)
    assert len(capped.removals) == 2 and capped.kept["not_needed"] == 1


def test_patterns_matching_returns_the_patterns_as_written_in_order():
    matching = patterns_matching(["*/bad:*", "good:1", " bad-alias:2 "])
    assert matching(NODE[0]) == ["*/bad:*", " bad-alias:2 "]
    assert matching(NODE[5]) == ["good:1"]
    assert patterns_matching(["good"])(NODE[5]) == []  # a name without a tag is :latest, as in keep_images


BASE = {"mode": "listed", "high_threshold_percent": None, "low_threshold_percent": None, "min_age": "2m", "max_age": "0s", "keep_images": [],
        "ledger_path": "", "measure_freed": True, "fail_on_insufficient": False, "max_removals": None, "parallelism": 64, "lock_timeout": 1.0,
        "cri_endpoint": None, "cri_timeout": 10}


def test_images_is_required_with_listed_and_refused_otherwise():
    assert gc.options(dict(BASE, images=["bad:*"]))["images"] == ["bad:*"]
    with pytest.raises(OptionError, match=r"^mode=listed needs images, the patterns of the images to remove \(as in keep_images\); none were given\.$"):
        gc.options(dict(BASE, images=None))
    with pytest.raises(OptionError, match=r"^mode=listed needs images"):
        gc.options(dict(BASE, images=[]))
    with pytest.raises(OptionError, match=r"^images names the images mode=listed removes; it is not used with mode=prune, so remove it or set "
                                          r"mode=listed\.$"):
        gc.options(dict(BASE, mode="prune", images=["bad:*"]))
    assert gc.options(dict(BASE, mode="prune"))["images"] == []
    with pytest.raises(OptionError, match=r"^images must not contain an empty pattern; remove it or name the image to remove\.$"):
        gc.options(dict(BASE, images=["bad:*", " "]))
    with pytest.raises(OptionError, match=r"^images pattern 'bad\[1' is not a valid glob"):
        gc.options(dict(BASE, images=["bad[1"]))


def test_the_result_names_the_pods_of_images_in_use_and_warns_of_the_rules():
    patterns = ["*/bad:*", "registry.k8s.io/*", "bad-alias:2"]
    containers = {
        "c-run": {"pod_namespace": "shop", "pod_name": "web-1", "name": "app", "state": "running"},
        "c-exited": {"pod_namespace": "jobs", "pod_name": "batch-1", "name": "step", "state": "exited"},
    }
    state = SimpleNamespace(plan=plan(NODE, patterns, keep=["registry.k8s.io/bad:*"]), containers=containers, raced=[])
    result = {"listed_kept": [], "warnings": []}
    gc._report_listed(result, state, {"images": patterns})
    by_tag = {k["repo_tags"][0]: k for k in result["listed_kept"]}
    assert by_tag["docker.io/library/bad:run"]["containers"] == [
        {"pod_namespace": "shop", "pod_name": "web-1", "container": "app", "state": "running", "running": True, "outside_kubernetes": False}]
    assert by_tag["docker.io/library/bad:exited"]["containers"] == [
        {"pod_namespace": "jobs", "pod_name": "batch-1", "container": "step", "state": "exited", "running": False, "outside_kubernetes": False}]
    assert by_tag["docker.io/library/bad:run"]["patterns"] == ["*/bad:*"] and by_tag["docker.io/library/bad:run"]["reason"] == "in_use"
    assert {t: k["reason"] for t, k in by_tag.items() if not k["containers"]} == {
        "registry.k8s.io/pause:3.10": "sandbox", "registry.k8s.io/bad:1": "keep_list", "docker.io/library/bad:pinned": "pinned"}
    assert result["warnings"] == [
        "images pattern 'registry.k8s.io/*' names sha256:%s (registry.k8s.io/pause:3.10), the runtime's sandbox image: it is never removed and "
        "stays." % ("3" * 64),
        "images patterns '*/bad:*', 'registry.k8s.io/*' name sha256:%s (registry.k8s.io/bad:1), kept by keep_images: it is never removed and "
        "stays." % ("4" * 64),
        "images pattern '*/bad:*' names sha256:%s (docker.io/library/bad:pinned), pinned by the runtime: it is never removed and stays." % ("6" * 64),
    ]
