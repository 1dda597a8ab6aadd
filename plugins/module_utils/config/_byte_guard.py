# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Edits keep every byte outside the edited keys: the splice and its guard. Pure text, no file format.

The editors (_yaml_edit, _toml_edit) render a whole document, and a round-trip library may rewrite lines it
was not asked to touch (ruamel.yaml writes ``True`` as ``true`` and ``key :`` as ``key:``, tomlkit re-indents
some table lines). ``splice`` keeps from the rendered text only the lines of the edited keys and takes every
other line from the original, in order; the editor then checks that the spliced text means what the rendered
one means. ``guard`` is the last check on the text to be written: every line outside the edited keys must be
the original's line, byte for byte, in the same order; otherwise the edit is refused with one sentence and
nothing is written.

A span is the set of line indexes (0-based) of the edited keys in one text. The two texts are aligned line by
line (difflib); a changed run of lines that touches no span is taken back from the original whole; in a run
that touches a span, the lines that are neither in a span nor blank must pair one to one with the
original's and are taken from it, and the blank lines next to the edit are the editor's.
"""

from __future__ import annotations

import difflib

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError


def refusal(path, keys, line):
    """The ConfigError refusing an edit of ``keys`` in ``path`` that would change ``line`` (0-based) of the original."""
    return ConfigError(
        "Editing %s would also change line %d, outside the edited key%s %s; nothing was written, set %s by hand."
        % (path, line + 1, "s" if len(keys) > 1 else "", ", ".join(keys), "them" if len(keys) > 1 else "it")
    )


def _hunks(old, new, old_span, new_span, path, keys):
    """Per aligned run of lines: (i1, i2, j1, j2, pairs) where pairs maps new line -> original line, or None for an equal run."""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            yield i1, i2, j1, j2, None
            continue
        if not any(i in old_span for i in range(i1, i2)) and not any(j in new_span for j in range(j1, j2)):
            yield i1, i2, j1, j2, "original"
            continue
        mine = [i for i in range(i1, i2) if i not in old_span and old[i].strip()]
        theirs = [j for j in range(j1, j2) if j not in new_span and new[j].strip()]
        if len(mine) != len(theirs):
            raise refusal(path, keys, (mine or [i1])[0] if len(mine) >= len(theirs) else (mine[-1] + 1 if mine else i1))
        yield i1, i2, j1, j2, dict(zip(theirs, mine))


def splice(original, rendered, old_span, new_span, path, keys, same_line=None):
    """``(text, lines)``: ``rendered`` with every line outside the edited keys taken from ``original``.

    ``lines`` are the original's line indexes that the rendering had changed (now restored).
    ``same_line(old, new)`` may adapt an original line to its place (JSON: the comma that ends it).
    Raises ConfigError (refusal) when the lines outside the spans cannot be paired (the editor added or
    removed a line elsewhere).
    """
    old, new = original.splitlines(True), rendered.splitlines(True)
    out, restored = [], []
    for i1, i2, j1, j2, pairs in _hunks(old, new, old_span, new_span, path, keys):
        if pairs is None:
            out += new[j1:j2]
        elif pairs == "original":
            out += old[i1:i2]
            restored += range(i1, i2)
        else:
            for j in range(j1, j2):
                if j not in pairs:
                    out.append(new[j])
                    continue
                line = old[pairs[j]] if same_line is None else same_line(old[pairs[j]], new[j])
                restored += [pairs[j]] if line != new[j] else []
                out.append(line)
    for n, line in enumerate(out[:-1]):
        if not line.endswith("\n"):  # the original's last line, now followed by an added key
            out[n] = line + "\n"
    return "".join(out), restored


def guard(original, final, old_span, new_span, path, keys, same_line=None):
    """Refuse (ConfigError, one sentence) unless every line of ``final`` outside ``new_span`` is the original's line outside ``old_span``.

    Blank lines next to an edited key may differ; ``same_line`` as for splice; the original's last line may have gained the newline it lacked.
    """
    old, new = original.splitlines(True), final.splitlines(True)
    for i1, i2, j1, j2, pairs in _hunks(old, new, old_span, new_span, path, keys):
        if pairs == "original":
            raise refusal(path, keys, i1)
        for j, i in (pairs or {}).items():
            a = old[i] if same_line is None else same_line(old[i], new[j])
            if a != new[j] and not (a.rstrip("\n") == new[j].rstrip("\n") and i == len(old) - 1):
                raise refusal(path, keys, i)
