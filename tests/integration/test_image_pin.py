# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.image_pin against every real runtime: what the CRI reports pinned afterwards, and what image_gc leaves."""

import glob
import os
import subprocess
import sys

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd._containerd_images import OWNER_LABEL, PINNED_LABEL, PINNED_VALUE, ContainerdImages
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriClient
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref
from devtools.images import ImageSpec

pytestmark = pytest.mark.runtimes("every")

MIB = 1 << 20
# containerd's CRI reports pinned from 1.7.3 on; cri-o through pinned_images
CAN_PIN = {"containerd-1.6": False, "containerd-1.7": True, "containerd-2.1": True, "containerd-2.2": True, "containerd-2.3": True, "crio": True,
           "cri-dockerd": False}
# the one warning of a runtime that cannot pin
CANNOT_PIN = {"containerd-1.6": "containerd {version} cannot pin images: its CRI reports images pinned only from containerd 1.7.3 on; nothing was changed.",
              "cri-dockerd": "Docker Engine {version} (through cri-dockerd) cannot pin images: cri-dockerd reports only its sandbox image pinned and "
                             "has no setting for others; nothing was changed."}
DROPIN = "99-kubenode-gc-pinned.conf"


def pinned_state(runtime):
    """{tag: pinned} as CRI ListImages reports it (tags in full: Docker lists docker.io's by their short names)."""
    return {normalize_image_ref(t): img.pinned for img in runtime.client.list_images() for t in img.repo_tags}


def pin(ansible, runtime, check=False, **args):
    args.setdefault("cri_endpoint", runtime.endpoint)
    return ansible.module("kubenode.gc.image_pin", args, check=check, diff=True)


def ids_of(runtime, *tags):
    found = {t: img.id for img in runtime.client.list_images() for t in img.repo_tags}
    return [{"id": found[t], "repo_tags": [t]} for t in tags]


@pytest.fixture
def clean_dropins(runtime):
    """cri-o's drop-in directory holds no pin files before and after the test (the runtime lives for the whole module)."""
    def clean():
        for path in glob.glob(os.path.join(getattr(runtime, "dropin_dir", "/nonexistent"), "*.conf")):
            os.unlink(path)
    clean()
    yield runtime
    clean()


def test_pin_check_real_idempotent_and_image_gc_keeps_pinned(ansible, clean_dropins, runtime_name):
    runtime = clean_dropins
    runtime.pull_images([ImageSpec("registry.k8s.io/pin-a:1", size=MIB), ImageSpec("registry.k8s.io/pin-b:1", size=MIB),
                         ImageSpec("junk-pin:1", size=MIB)])
    before = pinned_state(runtime)
    args = dict(images=["registry.k8s.io/pin-*"])

    plan = pin(ansible, runtime, check=True, **args)
    assert not plan.get("failed"), plan.get("msg")
    assert pinned_state(runtime) == before  # check mode changed nothing
    if not CAN_PIN[runtime_name]:
        assert plan["supported"] is False and plan["changed"] is False
        assert plan["pinned"] == [] and plan["unpinned"] == []
        assert plan["warnings"] == [CANNOT_PIN[runtime_name].format(version=runtime.client.version().runtime_version)]
        real = pin(ansible, runtime, **args)
        assert not real.get("failed"), real.get("msg")
        assert (real["supported"], real["changed"], real["pinned"]) == (False, False, [])
        assert pinned_state(runtime) == before
        assert real["rpc_calls"] == {"Version": 1}
        return

    expected = ids_of(runtime, "registry.k8s.io/pin-a:1", "registry.k8s.io/pin-b:1")
    expected.sort(key=lambda i: i["id"])
    assert plan["supported"] is True and plan["changed"] is True
    assert plan["pinned"] == expected and plan["unpinned"] == []
    sandbox = [runtime.sandbox_image]
    assert plan["diff"] == {"before": {"pinned": sandbox},
                            "after": {"pinned": sorted(sandbox + ["registry.k8s.io/pin-a:1", "registry.k8s.io/pin-b:1"])}}

    real = pin(ansible, runtime, **args)
    assert not real.get("failed"), real.get("msg")
    assert (real["changed"], real["pinned"], real["unpinned"], real["diff"]) == (True, expected, [], plan["diff"])
    assert pinned_state(runtime) == {runtime.sandbox_image: True, "registry.k8s.io/pin-a:1": True, "registry.k8s.io/pin-b:1": True,
                                     "docker.io/library/junk-pin:1": False}
    if runtime_name == "crio":
        assert real["crio_dropin"] == os.path.join(runtime.dropin_dir, DROPIN)
        with open(real["crio_dropin"], encoding="utf-8") as f:
            text = f.read()
        assert 'pinned_images = [\n  "registry.k8s.io/pin-a:1",\n  "registry.k8s.io/pin-b:1",\n]\n' in text

    again = pin(ansible, runtime, **args)
    assert (again["changed"], again["pinned"], again["unpinned"]) == (False, [], [])
    again_check = pin(ansible, runtime, check=True, **args)
    assert (again_check["changed"], again_check["pinned"]) == (False, [])

    # the kubelet's GC semantics (image_gc prune, no keep list) leave pinned images alone
    gc = ansible.module("kubenode.gc.image_gc", dict(cri_endpoint=runtime.endpoint, ledger_path="", min_age="0s", mode="prune"))
    assert not gc.get("failed"), gc.get("msg")
    assert [t for r in gc["removed"] for t in r["repo_tags"]] == ["docker.io/library/junk-pin:1"]
    assert gc["kept"]["pinned"] == 2
    assert set(runtime.image_refs()["tags"]) == {runtime.sandbox_image, "registry.k8s.io/pin-a:1", "registry.k8s.io/pin-b:1"}


def pin_by_someone_else(runtime, runtime_name, tag):
    if runtime_name == "crio":
        with open(os.path.join(runtime.dropin_dir, "50-other.conf"), "w", encoding="utf-8") as f:
            f.write('[crio.image]\npinned_images = ["%s"]\n' % tag)
        return  # cri-o reloads when image_pin sends SIGHUP; the module carries the list over into its drop-in
    with CriClient(runtime.endpoint) as client:
        api = ContainerdImages(client)
        record = next(r for r in api.list() if r.name == tag)
        api.set_labels(record, {PINNED_LABEL: PINNED_VALUE})


def test_exclusive_unpins_only_our_pins(ansible, clean_dropins, runtime_name):
    runtime = clean_dropins
    runtime.pull_images([ImageSpec("registry.k8s.io/ours:1", size=MIB), ImageSpec("registry.k8s.io/theirs:1", size=MIB)])
    if runtime_name == "cri-dockerd":  # nothing to pin with: exclusive changes nothing either
        before = pinned_state(runtime)
        result = pin(ansible, runtime, images=[], exclusive=True)
        assert (result["supported"], result["changed"], result["unpinned"]) == (False, False, [])
        assert pinned_state(runtime) == before
        return
    if not CAN_PIN[runtime_name]:  # containerd 1.6: exclusive changes nothing either, labels included
        pin_by_someone_else(runtime, runtime_name, "registry.k8s.io/theirs:1")
        before = pinned_state(runtime)
        result = pin(ansible, runtime, images=[], exclusive=True)
        assert (result["supported"], result["changed"], result["unpinned"]) == (False, False, [])
        with CriClient(runtime.endpoint) as client:
            labels = {r.name: dict(r.labels) for r in ContainerdImages(client).list()}
        assert labels["registry.k8s.io/theirs:1"].get(PINNED_LABEL) == PINNED_VALUE
        assert [n for n, lbl in labels.items() if OWNER_LABEL in lbl] == []
        assert pinned_state(runtime) == before
        return
    pin_by_someone_else(runtime, runtime_name, "registry.k8s.io/theirs:1")

    first = pin(ansible, runtime, images=["registry.k8s.io/ours:1"])
    assert not first.get("failed"), first.get("msg")
    assert first["pinned"] == ids_of(runtime, "registry.k8s.io/ours:1")
    state = pinned_state(runtime)
    assert (state["registry.k8s.io/ours:1"], state["registry.k8s.io/theirs:1"]) == (True, True)

    # exclusive with a list that no longer names it: ours goes, theirs stays; check mode first
    plan = pin(ansible, runtime, check=True, images=[], exclusive=True)
    assert (plan["changed"], plan["pinned"], plan["unpinned"]) == (True, [], ids_of(runtime, "registry.k8s.io/ours:1"))
    assert pinned_state(runtime) == state
    real = pin(ansible, runtime, images=[], exclusive=True)
    assert not real.get("failed"), real.get("msg")
    assert (real["changed"], real["pinned"], real["unpinned"]) == (True, [], plan["unpinned"])
    state = pinned_state(runtime)
    assert (state["registry.k8s.io/ours:1"], state["registry.k8s.io/theirs:1"]) == (False, True)
    assert pin(ansible, runtime, images=[], exclusive=True)["changed"] is False
    if runtime_name == "crio":
        with open(os.path.join(runtime.dropin_dir, DROPIN), encoding="utf-8") as f:
            text = f.read()
        assert '# kubenode.gc pins: []\n' in text and '"registry.k8s.io/theirs:1",' in text


@pytest.mark.runtimes("one")
def test_bad_pattern_fails_in_one_sentence_and_changes_nothing(ansible, runtime):
    runtime.pull_images([ImageSpec("registry.k8s.io/bad:1", size=MIB)])
    before = pinned_state(runtime)
    result = pin(ansible, runtime, images=["registry.k8s.io/[bad"])
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == "images pattern 'registry.k8s.io/[bad' is not a valid glob: the bracket at position 16 is never closed."
    assert pinned_state(runtime) == before


def test_ansible_doc_renders_from_the_installed_tarball(collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, "kubenode.gc.image_pin"], env=env, capture_output=True, text=True, check=True)
    for word in ("kubenode.gc.image_pin", "cri_endpoint", "exclusive", "crio_dropin", "io.kubenode.gc/pinned", "supported"):
        assert word in out.stdout
    assert collections_path in out.stdout
