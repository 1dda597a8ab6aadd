# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 11, items 7, 8 and 10: Go's duration limits, keep-list globs, nan/inf timeouts, pod_logs_dir, kind/apiVersion."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._durations import MAX_NS, DurationError, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as kc
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import check_keep_patterns
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc as cgc
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc as igc
from ansible_collections.kubenode.gc.plugins.modules import container_gc, image_gc

GOOD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_go_duration_limits():
    assert parse_duration("2562047h47m16.854775807s") == MAX_NS == 2**63 - 1
    assert parse_duration("-2562047h47m16.854775808s") == -(2**63)
    for text in ("2562047h47m16.854775808s", "2562048h", "9223372036854775808ns", "-2562047h47m16.854775809s"):
        with pytest.raises(DurationError, match="time: invalid duration"):
            parse_duration(text)


@pytest.mark.parametrize("spec, opts, name", [(image_gc.ARGUMENT_SPEC, igc.options, "min_age"), (image_gc.ARGUMENT_SPEC, igc.options, "max_age"),
                                              (container_gc.ARGUMENT_SPEC, cgc.options, "min_age")])
def test_gc_options_reject_durations_the_kubelet_cannot_hold(spec, opts, name):
    with pytest.raises(OptionError, match='%s .*time: invalid duration "2562048h"' % name):
        opts(params_for(spec, **{name: "2562048h"}))


def test_kubelet_config_refuses_an_overflowing_duration():
    with pytest.raises(ConfigError, match="imageMinimumGCAge"):
        kc.plan("/k.yaml", GOOD, settings=dict(imageMinimumGCAge="2562048h"))


@pytest.mark.parametrize("pattern, message", [("img[1-", "never closed"), ("", "empty pattern"), ("  ", "empty pattern"), ("a/[!x", "never closed")])
def test_malformed_keep_patterns_are_errors(pattern, message):
    with pytest.raises(OptionError, match=message):
        igc.options(params_for(image_gc.ARGUMENT_SPEC, keep_images=["busybox:*", pattern]))


@pytest.mark.parametrize("pattern", ["img[1-9]*", "a[]]b", "a[!]]b", "registry:5000/x:*", "sha256:0123456789ab"])
def test_valid_keep_patterns(pattern):
    check_keep_patterns([pattern])


@pytest.mark.parametrize("name", ["cri_timeout", "lock_timeout"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_timeouts_reject_nan_and_inf(name, value):
    with pytest.raises(OptionError, match="%s must be a (positive|finite)" % name):
        igc.options(params_for(image_gc.ARGUMENT_SPEC, **{name: value}))


def test_pod_logs_dir_that_is_a_file(tmp_path):
    f = tmp_path / "pods"
    f.write_text("")
    with pytest.raises(OptionError, match=r"^pod_logs_dir .* exists but is not a directory\.$"):
        cgc.options(params_for(container_gc.ARGUMENT_SPEC, pod_logs_dir=str(f)))


@pytest.mark.parametrize("text, found", [
    ("apiVersion: v1\nkind: ConfigMap\ndata: {}\n", "kind 'ConfigMap'"),
    ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "apiVersion 'kubelet.config.k8s.io/v1'"),
    ("kind: KubeletConfiguration\nimageGCHighThresholdPercent: 80\n", "apiVersion missing"),
    ("apiVersion: kubelet.config.k8s.io/v1beta1\n", "kind missing"),
    ("apiVersion: v1\ndata: {}\n", "kind missing"),
])
@pytest.mark.parametrize("settings", [None, dict(imageGCHighThresholdPercent=70)])
def test_kubelet_config_refuses_other_documents(text, found, settings):
    with pytest.raises(ConfigError, match="is not a KubeletConfiguration .*%s.*not touching it" % found):
        kc.plan("/k.yaml", text, settings=settings)
