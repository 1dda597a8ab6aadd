# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""disk_usage's record of the log directories already walked: the same answers as comparing a path with each of them,
through symlinks too, without comparing it with each of them."""

import os

from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage


def _pairwise_inside(path, top):
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def test_walked_answers_as_the_pairwise_comparison(tmp_path):
    for rel in ("logs/a/c1", "logs/a/c2", "logs/b", "other/x", "logsx"):
        (tmp_path / rel).mkdir(parents=True)
    os.symlink(tmp_path / "logs" / "a", tmp_path / "link")
    walked = _disk_usage._Walked()
    done = [str(tmp_path / "logs" / "a" / "c1"), str(tmp_path / "other")]
    for path in done:
        walked.add(path)
    probes = ["logs", "logs/a", "logs/a/c1", "logs/a/c1/f", "logs/a/c2", "logs/b", "logsx", "other", "other/x", "link",
              "link/c1", "link/c2", ""]
    for rel in probes:
        path = str(tmp_path / rel) if rel else "/"
        inside = any(_pairwise_inside(path, w) for w in done)
        holds = any(_pairwise_inside(w, path) for w in done)
        assert walked.inside(path) == inside, rel
        assert walked.overlaps(path) == (inside or holds), rel


def test_skipping_walker_counts_nothing_in_or_above_what_was_walked(tmp_path):
    class Walker:
        def size(self, top):
            return 7, True

    walked = _disk_usage._Walked()
    walked.add(str(tmp_path / "a" / "b"))
    skipping = _disk_usage._Skipping(Walker(), walked)
    assert skipping.size(str(tmp_path / "a")) == (0, True)
    assert skipping.size(str(tmp_path / "a" / "b" / "c")) == (0, True)
    assert skipping.size(str(tmp_path / "c")) == (7, True)
