# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.cleanup's outcome: when the waves stop, which reached nodes still need a history record, why the play fails."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter.cleanup_outcome import cleanup_fail_reason, cleanup_unrecorded, cleanup_wave_stop

CLEANED = {"host": "a", "status": "cleaned", "finished_at": "2026-11-23T10:00:00Z", "images": []}
GC_FAILED = {"host": "b", "status": "failed", "error": "The run stopped after 2 image(s) were removed.", "finished_at": "x", "images": []}
NO_GRPC = {"host": "c", "status": "failed", "error": "Failed to import the required Python library (grpcio).", "unreachable": False}
GONE = {"host": "d", "status": "failed", "error": "Failed to connect to the host via ssh.", "unreachable": True}
SKIPPED = {"host": "e", "status": "skipped", "reason": "imagefs usage 20% is below the high threshold 85%"}
STOPPED = {"host": "f", "status": "skipped", "stopped": True, "reason": "not cleaned: ..."}


def pairs(*records):
    return [[r, r["host"]] for r in records]


def test_wave_stop_follows_max_fail_percentage():
    assert cleanup_wave_stop(pairs(CLEANED, SKIPPED), 10) is None
    assert cleanup_wave_stop([], 10) is None
    assert cleanup_wave_stop(pairs(NO_GRPC), 10) == ("1 of the wave of 1 node failed (c), more than kubenode_gc_cleanup_max_fail_percentage 10%: "
                                                     "no further wave ran.")
    wave = pairs(CLEANED, NO_GRPC, SKIPPED, dict(CLEANED, host="g"))   # 25 % failed
    assert cleanup_wave_stop(wave, 25) is None and cleanup_wave_stop(wave, 24.5).startswith("1 of the wave of 4 nodes failed (c)")
    # a wave that failed whole stops even at 100 % (as Ansible does); a host without a record failed
    assert cleanup_wave_stop([[None, "x"]], 100).startswith("1 of the wave of 1 node failed (x)")
    with pytest.raises(AnsibleFilterError, match="max_fail_percentage to be a number"):
        cleanup_wave_stop(pairs(CLEANED), "ten")


def test_unrecorded_are_the_reached_nodes_the_wave_wrote_no_record_for():
    out = cleanup_unrecorded(pairs(CLEANED, GC_FAILED, NO_GRPC, GONE, SKIPPED, STOPPED) + [[None, "h"]])
    assert [r["host"] for r in out] == ["c", "e"]
    assert out[0] == NO_GRPC


def test_fail_reason_names_failed_and_unreachable_nodes_and_the_stop():
    assert cleanup_fail_reason(pairs(CLEANED, SKIPPED)) is None
    assert cleanup_fail_reason(pairs(CLEANED, GC_FAILED, NO_GRPC, GONE, SKIPPED) + [[None, "h"]]) == (
        "The cleanup did not succeed on every node: 3 nodes failed (b, c, h); 1 node could not be reached (d).")
    assert cleanup_fail_reason(pairs(NO_GRPC, STOPPED), stopped="1 of the wave of 1 node failed (c), more than ...: no further wave ran.") == (
        "The cleanup did not succeed on every node: 1 node failed (c); the waves stopped: 1 of the wave of 1 node failed (c), more than ...: "
        "no further wave ran.")
    with pytest.raises(AnsibleFilterError, match="list of \\[record, host\\] pairs"):
        cleanup_fail_reason("nope")


def test_an_interrupted_runs_record_is_completed_from_the_images_gone_since():
    from ansible_collections.kubenode.gc.plugins.filter.cleanup_outcome import cleanup_images_seen, cleanup_interrupted
    seen = cleanup_images_seen([{"id": "sha256:a", "repo_tags": ["x:1"], "size": 5, "pinned": False}, {"id": "sha256:b", "repo_tags": [], "size": 7},
                                {"id": "sha256:c", "repo_tags": ["keep:1"], "size": 11}, "junk"])
    assert seen == [{"id": "sha256:a", "repo_tags": ["x:1"], "size": 5}, {"id": "sha256:b", "repo_tags": [], "size": 7},
                    {"id": "sha256:c", "repo_tags": ["keep:1"], "size": 11}]
    provisional = {"host": "n", "status": "interrupted", "in_progress": True, "started_at": "T0", "images_before": seen}
    done = cleanup_interrupted(provisional, [{"id": "sha256:c"}, {"id": "sha256:new"}], "T1")
    assert done["in_progress"] is False and done["status"] == "interrupted" and "images_before" not in done
    assert [i["id"] for i in done["images"]] == ["sha256:a", "sha256:b"] and {i["reason"] for i in done["images"]} == {"interrupted_run"}
    assert done["bytes_freed_estimated"] == 12 and done["reconstructed_at"] == "T1" and done["started_at"] == "T0"
    assert done["note"].startswith("reconstructed by the next run")
    with pytest.raises(AnsibleFilterError, match="history record dict"):
        cleanup_interrupted("x", [])
