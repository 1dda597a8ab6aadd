# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""KubeletConfiguration editing, defaulting, validation (shared/docs/kubelet-gc-semantics.md §2), flags and findings."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as kc
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_flags as kflags

P = "invalid configuration: "
PATH = "/var/lib/kubelet/config.yaml"
MIN = 60 * 10**9

KUBEADM_YAML = """\
# kubelet settings for this node
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
evictionHard:
  memory.available: "100Mi"  # keep memory
  # disk signals
  nodefs.available: 10%
  imagefs.available: 15%
imageGCHighThresholdPercent: 85  # image GC starts here
imageMinimumGCAge: 2m0s
kind: KubeletConfiguration
"""


def values(**cfg):
    """The effective typed values for a file mapping."""
    return kc.effective(cfg)[0]


def errors(**cfg):
    eff, _sources, decode_errors, _flag_errors = kc.effective(cfg)
    return decode_errors + kc.validate(eff)


def codes(result):
    return [f["code"] for f in result["findings"]]


def apply(text, settings, path=PATH, **kwargs):
    return kc.plan(path, text, settings=settings, **kwargs)


# ---------------------------------------------------------------------------------------------- validation (§2.2)


@pytest.mark.parametrize(
    "cfg, message",
    [
        (dict(imageGCHighThresholdPercent=101), P + "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"),
        (dict(imageGCLowThresholdPercent=-1), P + "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive"),
        (dict(imageGCHighThresholdPercent=80, imageGCLowThresholdPercent=80),
         P + "imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 80"),
        (dict(imageGCHighThresholdPercent=70), P + "imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than "
         "imageGCHighThresholdPercent (--image-gc-high-threshold) 70"),
        (dict(imageMaximumGCAge="-1m"), P + "imageMaximumGCAge -1m0s must not be negative"),
        (dict(imageMinimumGCAge="-1m"), P + "imageMinimumGCAge -1m0s must not be negative"),
        (dict(imageMaximumGCAge="2m"), P + "imageMaximumGCAge 2m0s must be greater than imageMinimumGCAge 2m0s"),
        (dict(imageMaximumGCAge="1h", imageMinimumGCAge="90m"), P + "imageMaximumGCAge 1h0m0s must be greater than imageMinimumGCAge 1h30m0s"),
        (dict(containerLogMaxFiles=1), P + "containerLogMaxFiles (--container-log-max-files) 1 must be greater than 1"),
        (dict(containerLogMaxWorkers=0), P + "containerLogMaxWorkers must be greater than or equal to 1"),
        (dict(containerLogMonitorInterval="2s"), P + "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"),
        (dict(podLogsDir="var/log/pods"), P + 'pod logs path "var/log/pods" must be absolute path'),
        (dict(podLogsDir="/var/log//pods/"), P + 'pod logs path "/var/log//pods/" must be normalized'),
        (dict(podLogsDir="/var/log/p\u00f6ds"), P + 'pod logs path "/var/log/p\u00f6ds" mut contains ASCII characters only'),
        (dict(containerLogMaxSize="10 Mi"), "failed to initialize container log manager: failed to parse container log max size \"10 Mi\": "
         "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
        (dict(imageMinimumGCAge="2 minutes"), 'imageMinimumGCAge: time: unknown unit " minutes" in duration "2 minutes"'),
        (dict(evictionPressureTransitionPeriod="5"), 'evictionPressureTransitionPeriod: time: missing unit in duration "5"'),
        (dict(imageMinimumGCAge=120), "imageMinimumGCAge: json: cannot unmarshal number into Go value of type string"),
        (dict(imageGCHighThresholdPercent="85"),
         "json: cannot unmarshal string into Go struct field KubeletConfiguration.imageGCHighThresholdPercent of type int32"),
        (dict(containerLogMaxFiles=2**31),
         "json: cannot unmarshal number 2147483648 into Go struct field KubeletConfiguration.containerLogMaxFiles of type int32"),
        (dict(mergeDefaultEvictionSettings="true"),
         "json: cannot unmarshal string into Go struct field KubeletConfiguration.mergeDefaultEvictionSettings of type bool"),
        (dict(evictionHard=["memory.available<1Gi"]),
         "json: cannot unmarshal array into Go struct field KubeletConfiguration.evictionHard of type map[string]string"),
        (dict(evictionHard={"memory.available": 5}), "json: cannot unmarshal number 5 into Go struct field KubeletConfiguration.evictionHard of type string"),
    ],
)
def test_validation_messages(cfg, message):
    assert errors(**cfg) == [message]


# pkg/kubelet/apis/config/validation/validation_test.go TestValidateKubeletConfiguration (kubernetes master): its
# podLogsDir cases, which check that the errors contain the message; here every error is listed. The empty value comes
# from a drop-in: the kubelet defaults an empty podLogsDir of the file, and merges the drop-ins after its defaulting.
@pytest.mark.parametrize(
    "logs_dir, messages",
    [
        ("", [P + "podLogsDir was not specified", P + 'pod logs path "" must be absolute path', P + 'pod logs path "" must be normalized']),
        ("./test", [P + 'pod logs path "./test" must be absolute path', P + 'pod logs path "./test" must be normalized']),
        ("/path/../", [P + 'pod logs path "/path/../" must be normalized']),
        ("/\U0001f9ea", [P + 'pod logs path "/\U0001f9ea" mut contains ASCII characters only']),
    ],
)
def test_pod_logs_dir_validation_from_a_dropin(logs_dir, messages):
    eff, sources, decode_errors, _flag_errors = kc.effective({}, dropins=[("/etc/kubernetes/kubelet.conf.d/10-logs.conf", {"podLogsDir": logs_dir})])
    assert sources["podLogsDir"] == "dropin" and eff["podLogsDir"] == logs_dir
    assert decode_errors + kc.validate(eff) == messages


def test_an_empty_pod_logs_dir_in_the_file_is_defaulted():
    assert errors(podLogsDir="") == []


def test_several_errors_are_all_reported():
    assert errors(imageGCHighThresholdPercent=101, imageGCLowThresholdPercent=101) == [
        P + "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
        P + "imageGCLowThresholdPercent (--image-gc-low-threshold) 101 must be between 0 and 100, inclusive",
        P + "imageGCLowThresholdPercent (--image-gc-low-threshold) 101 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 101",
    ]


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        dict(imageGCHighThresholdPercent=100, imageGCLowThresholdPercent=99),
        dict(imageGCHighThresholdPercent=1, imageGCLowThresholdPercent=0),
        dict(imageMaximumGCAge="2m1s"),
        dict(imageMinimumGCAge="0s", imageMaximumGCAge="3m"),  # 0s is defaulted to 2m first
        dict(containerLogMaxFiles=2, containerLogMonitorInterval="3s", containerLogMaxSize="-1"),
        dict(evictionHard={"memory.available": "0%", "nodefs.available": "100%"}),  # ignored, not invalid
        dict(evictionSoft={"imagefs.available": "0%"}),  # ignored, so no grace period is needed
        dict(evictionMinimumReclaim={"memory.available": "0"}),
        dict(evictionHard={"containerfs.available": "10%", "pid.available": "1k", "allocatableMemory.available": "1Gi"}),
    ],
)
def test_valid_configurations(cfg):
    assert errors(**cfg) == []


@pytest.mark.parametrize(
    "cfg, message",
    [
        (dict(evictionHard={"disk.available": "10%"}), "unsupported eviction signal disk.available"),
        (dict(evictionSoft={"foo": "1Gi"}, evictionSoftGracePeriod={"foo": "1m"}), "unsupported eviction signal foo"),
        (dict(evictionMinimumReclaim={"bar": "1Gi"}), "unsupported eviction signal bar"),
        (dict(evictionHard={"memory.available": "101%"}), "eviction percentage threshold memory.available must be <= 100%: 101%"),
        (dict(evictionHard={"memory.available": "-5%"}), "eviction percentage threshold memory.available must be >= 0%: -5%"),
        (dict(evictionHard={"memory.available": "0"}), "eviction threshold memory.available must be positive: 0"),
        (dict(evictionHard={"memory.available": "-0.5Gi"}), "eviction threshold memory.available must be positive: -512Mi"),
        (dict(evictionHard={"memory.available": "abc%"}), 'evictionHard[memory.available]: strconv.ParseFloat: parsing "abc": invalid syntax'),
        (dict(evictionHard={"nodefs.available": "1e40%"}), 'evictionHard[nodefs.available]: strconv.ParseFloat: parsing "1e40": value out of range'),
        (dict(evictionHard={"memory.available": "1GB"}), "evictionHard[memory.available]: quantities must match the regular expression "
         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
        (dict(evictionSoft={"memory.available": "1Gi"}), "grace period must be specified for the soft eviction threshold memory.available"),
        (dict(evictionSoft={"memory.available": "1Gi"}, evictionSoftGracePeriod={"memory.available": "-1m"}),
         "invalid eviction grace period specified: -1m, must be a positive value"),
        (dict(evictionSoft={"memory.available": "1Gi"}, evictionSoftGracePeriod={"memory.available": "1 minute"}),
         'evictionSoftGracePeriod[memory.available]: time: unknown unit " minute" in duration "1 minute"'),
        (dict(evictionMinimumReclaim={"memory.available": "0%"}), "eviction percentage minimum reclaim memory.available must be positive: 0%"),
        (dict(evictionMinimumReclaim={"memory.available": "-1Mi"}), "negative eviction minimum reclaim specified for memory.available"),
        (dict(evictionMinimumReclaim={"memory.available": "x%"}), 'evictionMinimumReclaim[memory.available]: strconv.ParseFloat: parsing "x": invalid syntax'),
    ],
)
def test_eviction_messages(cfg, message):
    assert errors(**cfg) == [message]


def test_percentages_parse_like_go():
    assert kc.parse_percent("15%") == pytest.approx(0.15)
    assert kc.parse_percent("100.0000001%") == 1.0  # float32 rounding: accepted by the kubelet
    assert kc.parse_percent("1e1%") == pytest.approx(0.1)
    with pytest.raises(ValueError):
        kc.parse_percent(" 5%")


# ---------------------------------------------------------------------------------------------- defaulting (§2.1)


def test_defaults():
    eff = kc.report(values())
    assert eff == {
        "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80, "imageMinimumGCAge": "2m0s", "imageMaximumGCAge": "0s",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
                         "imagefs.inodesFree": "5%"},
        "evictionSoft": {}, "evictionSoftGracePeriod": {}, "evictionMinimumReclaim": {}, "evictionPressureTransitionPeriod": "5m0s",
        "evictionMaxPodGracePeriod": 0, "mergeDefaultEvictionSettings": False, "containerLogMaxSize": "10Mi", "containerLogMaxFiles": 5,
        "containerLogMaxWorkers": 1, "containerLogMonitorInterval": "10s", "podLogsDir": "/var/log/pods",
    }


def test_zero_durations_and_empty_strings_are_defaulted():
    eff = kc.report(values(imageMinimumGCAge="0s", evictionPressureTransitionPeriod="0", containerLogMaxSize="", podLogsDir="",
                           imageGCHighThresholdPercent=None))
    assert (eff["imageMinimumGCAge"], eff["evictionPressureTransitionPeriod"], eff["containerLogMaxSize"], eff["podLogsDir"]) == (
        "2m0s", "5m0s", "10Mi", "/var/log/pods")
    assert eff["imageGCHighThresholdPercent"] == 85  # null: the pointer stays nil
    assert values(containerLogMaxFiles=0)["containerLogMaxFiles"] == 0  # pointers keep an explicit zero


def test_eviction_hard_defaulting():
    assert values()["evictionHard"] == kc.DEFAULT_EVICTION_HARD
    assert values(evictionHard=None)["evictionHard"] == kc.DEFAULT_EVICTION_HARD
    assert values(evictionHard={})["evictionHard"] == {}
    assert values(evictionHard={"memory.available": "1Gi"})["evictionHard"] == {"memory.available": "1Gi"}
    merged = values(evictionHard={"memory.available": "1Gi"}, mergeDefaultEvictionSettings=True)["evictionHard"]
    assert merged == dict(kc.DEFAULT_EVICTION_HARD, **{"memory.available": "1Gi"})


def test_flags_apply_after_defaulting():
    flags = kflags.flag_overrides([dict(flag="--minimum-image-ttl-duration", value="0s", file="f"),
                                   dict(flag="--image-gc-high-threshold", value="90", file="f")])
    eff, sources, _errors, _flag_errors = kc.effective({"imageGCHighThresholdPercent": 70}, flags)
    assert (eff["imageMinimumGCAge"], eff["imageGCHighThresholdPercent"]) == (0, 90)
    assert sources["imageGCHighThresholdPercent"] == "flag"


def test_map_flags_replace_the_file_map_and_repeats_add():
    flags = kflags.flag_overrides([dict(flag="--eviction-hard", value="memory.available<1Gi", file="a"),
                                   dict(flag="--eviction-hard", value="nodefs.available<5%, imagefs.available<7%", file="b")])
    cfg = {"evictionHard": {"pid.available": "10"}, "mergeDefaultEvictionSettings": True}
    assert kc.effective(cfg, flags)[0]["evictionHard"] == {"memory.available": "1Gi", "nodefs.available": "5%", "imagefs.available": "7%"}


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--image-gc-high-threshold", "abc", 'invalid argument "abc" for "--image-gc-high-threshold" flag: strconv.ParseInt: parsing "abc": invalid syntax'),
        ("--container-log-max-files", "3000000000",
         'invalid argument "3000000000" for "--container-log-max-files" flag: strconv.ParseInt: parsing "3000000000": value out of range'),
        ("--minimum-image-ttl-duration", "5", 'invalid argument "5" for "--minimum-image-ttl-duration" flag: time: missing unit in duration "5"'),
        ("--eviction-hard", "memory.available=1Gi", 'invalid argument "memory.available=1Gi" for "--eviction-hard" flag: malformed pair, expect string<string'),
        ("--eviction-soft-grace-period", "memory.available<1m",
         'invalid argument "memory.available<1m" for "--eviction-soft-grace-period" flag: malformed pair, expect string=string'),
    ],
)
def test_flag_values_that_do_not_parse(flag, value, message):
    eff, _sources, _errors, flag_errors = kc.effective({}, kflags.flag_overrides([dict(flag=flag, value=value, file="/f")]))
    assert [f["message"] for f in flag_errors] == [message + " (in /f)"]
    assert eff == values()


def test_go_int_syntax_of_flags():
    assert [kflags._go_int32(t) for t in ("90", "0x5a", "0132", "0o132", "+90", "-1")] == [90, 90, 90, 90, 90, -1]


# ---------------------------------------------------------------------------------------------- flag files


KUBEADM_FLAGS = ('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock '
                 '--pod-infra-container-image=registry.k8s.io/pause:3.9 --image-gc-high-threshold=90"\n')
DEFAULT_KUBELET = """\
# Extra flags for the kubelet
KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5 --eviction-hard=memory.available<500Mi,nodefs.available<5% --maximum-dead-containers 100
"""
DROP_IN = """\
# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/srv/kubelet/config.yaml" "OTHER=--image-gc-low-threshold=60"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS \\
    --minimum-image-ttl-duration 5m \\
    --minimum-container-ttl-duration=1m \\
    --v=2
"""


def test_flag_files():
    flags = kflags.parse_flag_files([("/var/lib/kubelet/kubeadm-flags.env", KUBEADM_FLAGS), ("/etc/default/kubelet", DEFAULT_KUBELET),
                                     ("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", DROP_IN)])
    assert [(f["flag"], f["value"]) for f in flags] == [
        ("--image-gc-high-threshold", "90"),
        ("--eviction-hard", "memory.available<500Mi,nodefs.available<5%"),
        ("--maximum-dead-containers", "100"),
        ("--config", "/srv/kubelet/config.yaml"),
        ("--image-gc-low-threshold", "60"),
        ("--minimum-image-ttl-duration", "5m"),
        ("--minimum-container-ttl-duration", "1m"),
    ]
    assert kflags.config_flag(flags) == "/srv/kubelet/config.yaml"
    overrides = kflags.flag_overrides(flags)
    assert overrides[0] == dict(flag="--image-gc-high-threshold", value="90", file="/var/lib/kubelet/kubeadm-flags.env",
                                key="imageGCHighThresholdPercent", deprecated=False)
    assert [(o["key"], o["deprecated"]) for o in overrides if o["flag"].startswith(("--maximum", "--minimum-container"))] == [
        (None, True), (None, True)]
    assert "--config" not in [o["flag"] for o in overrides]


def test_flag_file_quoting_and_comments():
    text = ("# KUBELET_EXTRA_ARGS=--image-gc-high-threshold=1\n"
            "export KUBELET_ARGS='--image-gc-low-threshold=10 --node-labels=\"a=b c\"'\n"
            "BROKEN=\"--eviction-soft=x<1\n")
    flags = kflags.parse_flag_files([("/etc/sysconfig/kubelet", text)])
    assert [(f["flag"], f["value"]) for f in flags] == [("--image-gc-low-threshold", "10"), ("--eviction-soft", "x<1")]


def test_unit_files_only_read_environment_and_exec_start():
    text = "[Service]\nExecStartPre=/bin/true --image-gc-high-threshold=1\nRestart=always\nExecStart=/usr/bin/kubelet --image-gc-high-threshold 2\n"
    assert [(f["flag"], f["value"]) for f in kflags.parse_flag_files([("u.conf", text)])] == [("--image-gc-high-threshold", "2")]


# ---------------------------------------------------------------------------------------------- findings


def test_findings_of_the_kubelet_defaults():
    result = kc.plan(PATH, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    assert codes(result) == ["gc_high_at_or_above_eviction"]  # 85 >= 100 - 15
    assert result["findings"][0]["message"].startswith("imageGCHighThresholdPercent 85 is at or above 85% disk usage, where the hard eviction")


def test_findings():
    text = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 50
imageMaximumGCAge: 1m
evictionHard:
  memory.available: 100Mi
  imagefs.available: 10%
evictionSoft:
  imagefs.available: 20%
evictionSoftGracePeriod:
  imagefs.available: 1m
"""
    flags = kflags.flag_overrides([dict(flag="--maximum-dead-containers", value="10", file="/f"),
                                   dict(flag="--image-gc-high-threshold", value="95", file="/f"),
                                   dict(flag="--container-log-max-files", value="x", file="/f")])
    result = kc.plan(PATH, text, overrides=flags)
    assert codes(result) == ["invalid_config", "invalid_flag", "max_age_not_above_min", "deprecated_flag", "flag_overrides_file",
                             "gc_high_at_or_above_eviction", "gc_high_at_or_above_eviction", "partial_eviction_hard"]
    messages = [f["message"] for f in result["findings"]]
    assert messages[0] == P + "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s"
    assert messages[1] == 'invalid argument "x" for "--container-log-max-files" flag: strconv.ParseInt: parsing "x": invalid syntax (in /f)'
    assert messages[2].startswith("imageMaximumGCAge 1m0s is not above imageMinimumGCAge 2m0s")
    assert messages[3].startswith("--maximum-dead-containers=10 in /f is a deprecated container garbage collection flag")
    assert messages[4].startswith("--image-gc-high-threshold=95 in /f overrides the config file's imageGCHighThresholdPercent 100")
    assert "hard eviction threshold imagefs.available<10%" in messages[5] and "soft eviction threshold imagefs.available<20%" in messages[6]
    assert "nodefs.available<10%, nodefs.inodesFree<5%, imagefs.inodesFree<5% are not monitored" in messages[7]
    assert [f["severity"] for f in result["findings"]] == ["error"] * 3 + ["warning"] * 5


def test_image_gc_disabled_is_info_and_not_an_eviction_clash():
    result = kc.plan(PATH, "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 90\n")
    assert codes(result) == ["image_gc_disabled"]
    assert "garbage collection is disabled" in result["findings"][0]["message"]


def test_merge_default_eviction_settings_silences_partial_eviction_hard():
    text = "evictionHard:\n  memory.available: 1Gi\nmergeDefaultEvictionSettings: true\nimageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\n"
    assert codes(kc.plan(PATH, text)) == []


def test_write_mode_fails_instead_of_reporting_invalid_config():
    with pytest.raises(kc.ConfigError) as exc:
        apply(KUBEADM_YAML, {"imageGCLowThresholdPercent": 90, "containerLogMaxFiles": 1})
    assert str(exc.value) == (
        "Not writing /var/lib/kubelet/config.yaml because the kubelet would reject the result: " + P + "imageGCLowThresholdPercent "
        "(--image-gc-low-threshold) 90 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85; " + P
        + "containerLogMaxFiles (--container-log-max-files) 1 must be greater than 1.")


def test_write_mode_validates_with_the_flags_applied():
    flags = kflags.flag_overrides([dict(flag="--image-gc-high-threshold", value="60", file="/var/lib/kubelet/kubeadm-flags.env")])
    with pytest.raises(kc.ConfigError) as exc:
        apply(KUBEADM_YAML, {"imageGCLowThresholdPercent": 70}, overrides=flags)
    assert "(with the flags in /var/lib/kubelet/kubeadm-flags.env applied on top, as the kubelet does)" in str(exc.value)


# ---------------------------------------------------------------------------------------------- editing


def test_yaml_edit_keeps_comments_order_quoting_and_other_keys():
    result = apply(KUBEADM_YAML, {
        "imageGCHighThresholdPercent": 75, "imageGCLowThresholdPercent": "60", "imageMaximumGCAge": "168h",
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "10%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
    })
    assert result["after"] == KUBEADM_YAML.replace('"100Mi"  # keep', '"200Mi"  # keep').replace(
        "  imagefs.available: 15%\n", "  imagefs.available: 15%\n  imagefs.inodesFree: 5%\n").replace(
        "imageGCHighThresholdPercent: 85", "imageGCHighThresholdPercent: 75").replace(
        "imageMinimumGCAge: 2m0s\n", "imageGCLowThresholdPercent: 60\nimageMaximumGCAge: 168h\nimageMinimumGCAge: 2m0s\n")
    assert result["changed"] and not result["created"] and result["format"] == "yaml"
    assert result["config"]["imageGCLowThresholdPercent"] == 60 and result["config"]["evictionHard"].__class__ is dict


def test_yaml_unsorted_keys_get_new_keys_at_the_end_and_document_markers_stay():
    text = "# header\n---\nkind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
    after = apply(text, {"containerLogMaxSize": "50Mi"})["after"]
    assert after == text + "containerLogMaxSize: 50Mi\n"


def test_yaml_indentation_is_detected():
    text = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            "authentication:\n    anonymous:\n        enabled: false\nclusterDNS:\n    - 10.96.0.10\nstaticPodPath: /etc\n")
    after = apply(text, {"evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "1m"}})["after"]
    assert after == text + "evictionSoft:\n    memory.available: 1Gi\nevictionSoftGracePeriod:\n    memory.available: 1m\n"


def test_map_replacement_keeps_comments_of_entries_that_stay():
    result = apply(KUBEADM_YAML, {"evictionHard": {"nodefs.available": "10%", "imagefs.available": "20%"}})
    assert "evictionHard:\n  # disk signals\n  nodefs.available: 10%\n  imagefs.available: 20%\nimageGC" in result["after"]
    text = "a: 1\nevictionHard:\n  memory.available: 1Gi  # mem\n  nodefs.available: 5%  # node\n  # about images\n  imagefs.available: 9%\n"
    after = apply(text, {"evictionHard": {"memory.available": "1Gi", "imagefs.available": "9%"}})["after"]
    assert after == "a: 1\nevictionHard:\n  memory.available: 1Gi  # mem\n  # about images\n  imagefs.available: 9%\n"


def test_null_removes_a_key():
    result = apply(KUBEADM_YAML, {"imageMinimumGCAge": None, "evictionHard": None, "podLogsDir": None})
    assert "imageMinimumGCAge" not in result["after"] and "evictionHard" not in result["after"] and "# keep memory" not in result["after"]
    assert "imageGCHighThresholdPercent: 85  # image GC starts here\nkind:" in result["after"]
    assert result["effective"]["evictionHard"] == kc.DEFAULT_EVICTION_HARD
    assert not apply(KUBEADM_YAML, {"podLogsDir": None})["changed"]


def test_semantically_equal_values_are_not_rewritten():
    text = KUBEADM_YAML.replace("kind:", "evictionSoftGracePeriod:\n  memory.available: 90s\nkind:")
    result = apply(text, {
        "imageGCHighThresholdPercent": "85", "imageMinimumGCAge": "2m", "evictionSoftGracePeriod": {"memory.available": "1m30s"},
        "evictionHard": {"imagefs.available": "15.0%", "nodefs.available": "10%", "memory.available": "104857600"},
    })
    assert not result["changed"] and result["after"] == text


def test_types_that_differ_are_rewritten():
    assert apply("imageGCHighThresholdPercent: '85'\n", {"imageGCHighThresholdPercent": 85})["after"] == "imageGCHighThresholdPercent: 85\n"


def test_json_keeps_indent_order_and_trailing_newline():
    text = ('{\n    "kind": "KubeletConfiguration",\n    "evictionHard": {\n        "memory.available": "100Mi"\n    },\n'
            '    "apiVersion": "kubelet.config.k8s.io/v1beta1"\n}')
    result = apply(text, {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 70, "evictionHard": {"memory.available": "1Gi"}},
                   path="/etc/kubernetes/kubelet/kubelet-config.json")
    assert result["format"] == "json"
    assert result["after"] == ('{\n    "kind": "KubeletConfiguration",\n    "evictionHard": {\n        "memory.available": "1Gi"\n    },\n'
                               '    "apiVersion": "kubelet.config.k8s.io/v1beta1",\n'
                               '    "imageGCHighThresholdPercent": 80,\n    "imageGCLowThresholdPercent": 70\n}')
    assert not apply(result["after"], {"imageGCHighThresholdPercent": "80"})["changed"]


def test_json_tabs_compact_and_sorted():
    assert apply('{\n\t"a": 1\n}\n', {"containerLogMaxFiles": 3})["after"] == '{\n\t"a": 1,\n\t"containerLogMaxFiles": 3\n}\n'
    assert apply('{"a": 1}', {"containerLogMaxFiles": 3})["after"] == '{"a": 1, "containerLogMaxFiles": 3}'
    assert apply("{}\n", {"containerLogMaxFiles": 3})["after"] == '{\n  "containerLogMaxFiles": 3\n}\n'
    assert apply('{"a": 1, "z": 2}', {"containerLogMaxFiles": 3})["after"] == '{"a": 1, "containerLogMaxFiles": 3, "z": 2}'


def test_read_only_never_changes():
    result = kc.plan(PATH, KUBEADM_YAML)
    assert not result["changed"] and result["after"] == KUBEADM_YAML and result["config"]["cgroupDriver"] == "systemd"
    result = kc.plan(PATH, "imageGCHighThresholdPercent: 101\n")
    assert not result["changed"] and codes(result) == ["invalid_config"]


def test_content_creates_and_converts():
    result = kc.plan("/etc/kubernetes/kubelet/kubelet-config.json", None, content="apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
                     settings={"imageGCHighThresholdPercent": 90})
    assert result["created"] and result["changed"] and result["format"] == "json" and result["before"] == ""
    assert result["after"] == ('{\n  "apiVersion": "kubelet.config.k8s.io/v1beta1",\n  "imageGCHighThresholdPercent": 90,\n'
                               '  "kind": "KubeletConfiguration"\n}\n')
    result = kc.plan(PATH, None, content='{"apiVersion": "kubelet.config.k8s.io/v1beta1", '
                     '"kind": "KubeletConfiguration", "evictionHard": {"memory.available": "1Gi"}}')
    assert result["after"] == "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 1Gi\n"
    assert result["format"] == "yaml"
    same = kc.plan(PATH, result["after"],
                   content='{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "evictionHard": {"memory.available": "1Gi"}}')
    assert not same["changed"] and not same["created"]


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, message",
    [
        ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 1Gi\n   nodefs.available: 5%\n",
         "Cannot parse /var/lib/kubelet/config.yaml as YAML: line 5, column 20: mapping values are not allowed here."),
        ("a: 1\na: 2\n", 'Cannot parse /var/lib/kubelet/config.yaml as YAML: line 2, column 1: found duplicate key "a".'),
        ('{"kind": "KubeletConfiguration",\n "x": }\n', "Cannot parse /var/lib/kubelet/config.yaml as JSON: line 2, column 7: Expecting value."),
        ("- a\n", "The top level of /var/lib/kubelet/config.yaml is a list, not a mapping of KubeletConfiguration fields."),
        ("# nothing\n", "The top level of /var/lib/kubelet/config.yaml is empty, not a mapping of KubeletConfiguration fields."),
        (None, "The kubelet configuration file /var/lib/kubelet/config.yaml does not exist; give content to create it."),
    ],
)
def test_file_errors(text, message):
    with pytest.raises(kc.ConfigError) as exc:
        kc.plan(PATH, text)
    assert str(exc.value) == message


def test_content_errors_name_the_content():
    with pytest.raises(kc.ConfigError, match=r"^Cannot parse the content given for /var/lib/kubelet/config.yaml as YAML: line 1"):
        kc.plan(PATH, None, content="a: b: c\n")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"foo": 1}, "Unsupported key in settings: foo; the supported keys are " + ", ".join(sorted(kc.KINDS)) + "."),
        ({"foo": 1, "bar": 2}, "Unsupported keys in settings: bar, foo; the supported keys are " + ", ".join(sorted(kc.KINDS)) + "."),
        ({"imageGCHighThresholdPercent": "8x"}, "settings.imageGCHighThresholdPercent must be an integer (or a string of digits), got '8x'."),
        ({"imageGCHighThresholdPercent": "-1"}, "settings.imageGCHighThresholdPercent must be an integer (or a string of digits), got '-1'."),
        ({"imageGCHighThresholdPercent": True}, "settings.imageGCHighThresholdPercent must be an integer (or a string of digits), got True."),
        ({"imageMinimumGCAge": 120}, "settings.imageMinimumGCAge must be a Go duration string such as 2m or 1h30m, got 120."),
        ({"mergeDefaultEvictionSettings": "yes"}, "settings.mergeDefaultEvictionSettings must be a boolean, got 'yes'."),
        ({"evictionHard": "memory.available<1Gi"},
         "settings.evictionHard must be a mapping of eviction signal to value, got 'memory.available<1Gi'."),
        ({"evictionHard": {"memory.available": [1]}}, "settings.evictionHard.memory.available must be a string, got [1]."),
        ({"containerLogMaxSize": 1.5}, "settings.containerLogMaxSize must be a quantity string such as 10Mi, got 1.5."),
    ],
)
def test_settings_errors(settings, message):
    with pytest.raises(kc.ConfigError) as exc:
        apply(KUBEADM_YAML, settings)
    assert str(exc.value) == message


def test_settings_conversions():
    assert kc.normalize_settings({"containerLogMaxSize": 1048576, "evictionHard": {"pid.available": 100}, "containerLogMaxFiles": "7"}) == {
        "containerLogMaxSize": "1048576", "evictionHard": {"pid.available": "100"}, "containerLogMaxFiles": 7}


def test_partial_eviction_hard_from_a_flag():
    flags = kflags.flag_overrides([dict(flag="--eviction-hard", value="memory.available<1Gi,nodefs.available<10%", file="/f")])
    result = kc.plan(PATH, "imageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\n", overrides=flags)
    partial = [f["message"] for f in result["findings"] if f["code"] == "partial_eviction_hard"]
    assert partial == ["the --eviction-hard flag replaces the kubelet's default hard eviction thresholds, so nodefs.inodesFree<5%, "
                       "imagefs.available<15%, imagefs.inodesFree<5% are not monitored; list them in the flag too"]


def test_plan_reports_changes_as_drift():
    existing = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                "imageGCHighThresholdPercent: 95\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 2m0s\n")
    result = kc.plan("/x/config.yaml", existing, settings={"imageGCHighThresholdPercent": 80, "imageMinimumGCAge": "2m", "containerLogMaxFiles": 3})
    assert result["changes"] == [
        {"key": "imageGCHighThresholdPercent", "before": 95, "after": 80},
        {"key": "containerLogMaxFiles", "before": 5, "after": 3},  # the kubelet's default before
    ]
    assert kc.plan("/x/config.yaml", existing)["changes"] == []
    # writing a key the file lacks, with the kubelet's default value, is no drift
    assert kc.plan("/x/config.yaml", existing, settings={"imageMaximumGCAge": "0s"})["changes"] == []


def test_feature_gates_from_the_file_then_the_flags():
    cfg = {"featureGates": {"KubeletEnsureSecretPulledImages": False, "Other": True, "NotABool": "yes"}}
    flags = ["KubeletEnsureSecretPulledImages=true, Third=F", "Third=1,Broken=maybe,=true"]
    gates = kc.feature_gates(cfg, flags)
    assert gates["KubeletEnsureSecretPulledImages"] is True and gates["Other"] is True and gates["Third"] is True
    assert "NotABool" not in gates and "Broken" not in gates and "" not in gates
    assert kc.feature_gates({}, []) == {} and kc.feature_gates({"featureGates": "x"}) == {}


def test_feature_gates_and_root_dir_flags_are_read_but_are_no_overrides():
    text = 'KUBELET_KUBEADM_ARGS="--root-dir=/data/kubelet --feature-gates KubeletEnsureSecretPulledImages=false --image-gc-high-threshold=90"\n'
    flags = kflags.parse_flag_files([("/var/lib/kubelet/kubeadm-flags.env", text)])
    assert kflags.info_flags(flags, kflags.ROOT_DIR_FLAG) == ["/data/kubelet"]
    assert kflags.info_flags(flags, kflags.FEATURE_GATES_FLAG) == ["KubeletEnsureSecretPulledImages=false"]
    assert [f["flag"] for f in kflags.flag_overrides(flags)] == ["--image-gc-high-threshold"]
