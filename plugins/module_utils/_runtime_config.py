# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Storage settings of containerd and CRI-O in their TOML files: read, edit in place, audit.

Pure logic on file texts, nothing of Ansible.  Edits are tomlkit round trips: the parsed
document is changed item by item (values replaced keep their comment and indentation; new
keys go after the last key of their table; new tables after the last table of their parent,
before the blank lines and comments that lead to the next table), then dumped, parsed again
with tomlkit and, where available, the strict ``tomllib``, and every edited value read back.
Each edit is made on a fresh parse, so tomlkit's own placement heuristics, which differ
between its versions, are never used.  Every error is a ConfigError whose text is one sentence.
"""

from __future__ import annotations

import os
import re
import traceback

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._findings import finding, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils._snapshot import normalize_image_ref

try:
    import tomlkit
    from tomlkit.container import Container
    from tomlkit.exceptions import TOMLKitError
    from tomlkit.items import AoT, InlineTable, KeyType, SingleKey, String, Table, Trivia
except ImportError:
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None

try:
    import tomllib  # Python 3.11+: a strict second parser for every edited text
except ImportError:
    tomllib = None

CONTAINERD_PATH = "/etc/containerd/config.toml"
CRIO_PATH = "/etc/crio/crio.conf"
STORAGE_PATH = "/etc/containers/storage.conf"
DROPIN_DIR = "/etc/crio/crio.conf.d"

CONTAINERD_KEYS = ("root", "state", "snapshotter", "sandbox_image")
CRIO_KEYS = ("graphroot", "runroot", "imagestore", "driver", "pause_image")
PATH_KEYS = ("root", "state", "graphroot", "runroot", "imagestore")
DRIVERS = ("overlay", "vfs", "btrfs", "zfs", "devmapper", "aufs")

# containerd config version -> setting -> (table, key)
_CRI_V1 = ("plugins", "cri")
_CRI_V2 = ("plugins", "io.containerd.grpc.v1.cri")
_IMAGES_V3 = ("plugins", "io.containerd.cri.v1.images")
CONTAINERD_LAYOUT = {
    1: dict(root=((), "root"), state=((), "state"), snapshotter=(_CRI_V1 + ("containerd",), "snapshotter"), sandbox_image=(_CRI_V1, "sandbox_image")),
    2: dict(root=((), "root"), state=((), "state"), snapshotter=(_CRI_V2 + ("containerd",), "snapshotter"), sandbox_image=(_CRI_V2, "sandbox_image")),
    3: dict(root=((), "root"), state=((), "state"), snapshotter=(_IMAGES_V3, "snapshotter"), sandbox_image=(_IMAGES_V3 + ("pinned_images",), "sandbox")),
}
# None: the default depends on the runtime's version
CONTAINERD_DEFAULTS = dict(root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image=None)

# CRI-O: storage.conf [storage] keys, the [crio] keys of crio.conf and its drop-ins that override them, and pause_image
STORAGE_TABLE = ("storage",)
CRIO_TABLE = ("crio",)
CRIO_IMAGE_TABLE = ("crio", "image")
CRIO_OVERRIDES = dict(graphroot="root", runroot="runroot", imagestore="imagestore", driver="storage_driver")
CRIO_DEFAULTS = dict(graphroot="/var/lib/containers/storage", runroot="/run/containers/storage", imagestore=None, driver=None, pause_image=None)

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
IMAGE_REF = re.compile(
    r"^(?:(?:%s(?:\.%s)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?/)?%s(?:/%s)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$" % (_LABEL, _LABEL, _COMPONENT, _COMPONENT)
)
SNAPSHOTTER = re.compile(r"^[a-z0-9_.-]+$")


def detect_runtime(path, crio_options, exists=os.path.exists):
    """containerd or crio, from the crio-only options given or the files present; ConfigError when unclear."""
    if crio_options:
        return "crio"
    containerd = exists(path or CONTAINERD_PATH)
    crio = [f for f in (STORAGE_PATH, CRIO_PATH) if exists(f)]
    if containerd != bool(crio):
        return "containerd" if containerd else "crio"
    if containerd:
        raise ConfigError("Both %s and %s exist, so the runtime is ambiguous; set runtime to containerd or crio." % (path or CONTAINERD_PATH, crio[0]))
    raise ConfigError(
        "None of %s, %s and %s exists, so the runtime cannot be detected; set runtime to containerd or crio."
        % (path or CONTAINERD_PATH, STORAGE_PATH, CRIO_PATH)
    )


# -- parsing and reading ------------------------------------------------------


def parse(text, path):
    """The tomlkit document of ``text``; ConfigError with the line number when it is not TOML."""
    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        line, col = getattr(exc, "line", None), getattr(exc, "col", None)
        reason = re.sub(r"\.? at line \d+ col \d+$", "", str(exc)).rstrip(".")
        if tomllib is not None:  # the strict parser names the line more exactly (tomlkit may name the next one, or none)
            try:
                tomllib.loads(text)
            except tomllib.TOMLDecodeError as strict:
                found = re.search(r"^(.*) \(at line (\d+), column (\d+)\)$", str(strict))
                if found:
                    reason, line, col = found.group(1), int(found.group(2)), int(found.group(3))
        where = "line %d, column %d" % (line, col) if line else "an unknown line"
        raise ConfigError("%s is not valid TOML at %s: %s." % (path, where, reason)) from None


def lookup(data, table, key):
    """``data[table...][key]`` of an unwrapped document, or None."""
    node = data
    for part in table + (key,):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _blank(value):
    return None if value in ("", None) else value


def same(key, current, wanted):
    """Whether a file's value already is the wanted one (paths after normpath, overlay2 = overlay)."""
    if not isinstance(current, str):
        return False
    if key in PATH_KEYS:
        return os.path.normpath(current) == os.path.normpath(wanted)
    if key == "driver":
        return {"overlay2": "overlay"}.get(current, current) == wanted
    return current == wanted


def check_settings(runtime, settings):
    """The settings to enforce, checked and normalised; null values are left out."""
    keys = CONTAINERD_KEYS if runtime == "containerd" else CRIO_KEYS
    unknown = sorted(set(settings or {}) - set(keys))
    if unknown:
        raise ConfigError(
            "Unknown settings key%s %s for runtime %s; the supported keys are %s."
            % ("s" if len(unknown) > 1 else "", ", ".join(unknown), runtime, ", ".join(keys))
        )
    wanted = {}
    for key in keys:
        value = (settings or {}).get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigError("settings.%s must be a string, got %r." % (key, value))
        if key in PATH_KEYS:
            if not value.startswith("/"):
                raise ConfigError("settings.%s must be an absolute path, got %r." % (key, value))
            value = os.path.normpath(value)
            if value == "/":
                raise ConfigError("settings.%s must be a directory below /, not / itself." % key)
        elif key == "snapshotter" and not SNAPSHOTTER.match(value):
            raise ConfigError("settings.snapshotter must be a snapshotter name of lowercase letters, digits, '_', '.' and '-', got %r." % value)
        elif key == "driver" and value not in DRIVERS:
            raise ConfigError("settings.driver must be one of %s, got %r." % (", ".join(DRIVERS), value))
        elif key in ("sandbox_image", "pause_image") and not IMAGE_REF.match(value):
            raise ConfigError("settings.%s must be an image reference such as registry.k8s.io/pause:3.10, got %r." % (key, value))
        wanted[key] = value
    return wanted


# -- editing ------------------------------------------------------------------


def _walk(body, prefix, out):
    """out[table path] -> [(key, item)] for every table, header or not, in document order."""
    for key, item in body:
        if key is not None and isinstance(item, (Table, InlineTable)):
            path = prefix + (key.key,)
            out.setdefault(path, []).append((key, item))
            _walk(item.value.body, path, out)
    return out


def _is_header(key, item):
    return isinstance(item, Table) and not key.is_dotted() and not item.is_super_table()


def _is_kv(key, item):
    return key is not None and not isinstance(item, AoT) and not (isinstance(item, Table) and not key.is_dotted())


def _kv_indent(body, default=""):
    for key, item in body:
        if _is_kv(key, item):
            if isinstance(item, Table):  # dotted keys: the indentation is on the innermost value
                return _kv_indent(item.value.body, default)
            return item.trivia.indent.replace("\n", "")
    return default


def _new_item(value, literal, like=None):
    if isinstance(value, int):
        item = tomlkit.integer(value)
    else:
        if isinstance(like, String):
            literal = like.as_string().startswith("'")  # keep the file's quoting
        item = tomlkit.string(value, literal=literal and "'" not in value)
    if like is not None and hasattr(like, "trivia"):
        item.trivia.indent, item.trivia.comment_ws = like.trivia.indent, like.trivia.comment_ws
        item.trivia.comment, item.trivia.trail = like.trivia.comment, like.trivia.trail
    else:
        item.trivia.trail = "\n"
    return item


def _key(name, literal):
    if re.match(r"^[A-Za-z0-9_-]+$", name):
        return SingleKey(name)
    return SingleKey(name, t=KeyType.Literal if literal else KeyType.Basic)


def _detach_tail(body):
    """Remove and return the comments and blank lines that end ``body`` and its last tables."""
    moved = []
    while True:
        tail = []
        while body and body[-1][0] is None:
            tail.insert(0, body.pop())
        moved = tail + moved
        if body and isinstance(body[-1][1], Table) and not body[-1][0].is_dotted():
            body = body[-1][1].value.body
        else:
            return moved


def _first_header(body):
    for key, item in body:
        if key is not None and isinstance(item, Table) and not key.is_dotted():
            return item if not item.is_super_table() else _first_header(item.value.body)
    return None


def _body(item):
    return item.body if isinstance(item, tomlkit.TOMLDocument) else item.value.body


def _set(text, path, table, key, value, literal):
    """Set one key on a fresh parse of ``text``; return the new text."""
    doc = tomlkit.parse(text)
    tables = _walk(doc.body, (), {})
    chunks = [(None, doc)] if not table else tables.get(table, [])
    # 1. the key exists: replace its value, keeping indentation and comment
    for chunk in chunks:
        body = _body(chunk[1])
        for i, (k, item) in enumerate(body):
            if _is_kv(k, item) and k.key == key and not isinstance(item, Table):
                body[i] = (k, _new_item(value, literal, like=item))
                return tomlkit.dumps(doc)
    # 2. the table exists with a header (or is the document): add the key after its last key
    header = doc if not table else next((item for k, item in chunks if _is_header(k, item)), None)
    if header is not None:
        own = "" if header is doc else header.trivia.indent.replace("\n", "")
        kv_indent = _kv_indent(_body(header), own)
    else:
        # only sub-tables define it so far: give it a header of its own, right before them
        implicit = next((item for k, item in chunks if isinstance(item, Table) and not k.is_dotted()), None)
        first = _first_header(implicit.value.body) if implicit is not None else None
        if first is None:
            if chunks:
                raise ConfigError(
                    "Cannot add %s to %s: that table is written inline or with dotted keys; add the key by hand." % (".".join(table + (key,)), path)
                )
            return _add_table(doc, tables, table, key, value, literal)
        header = implicit
        header._is_super_table = False  # pylint: disable=protected-access
        header.trivia.indent, header.trivia.trail = first.trivia.indent.replace("\n", ""), "\n"
        kv_indent = _kv_indent(first.value.body, header.trivia.indent)
        first.trivia.indent = "\n" + first.trivia.indent.replace("\n", "")
    body = _body(header)
    kvs = [i for i, (k, item) in enumerate(body) if _is_kv(k, item)]
    if kvs:
        at = kvs[-1] + 1
    else:
        at = len(body) if header is doc and not tables else 0
    item = _new_item(value, literal)
    item.trivia.indent = kv_indent
    body.insert(at, (_key(key, literal), item))
    return tomlkit.dumps(doc)


def _add_table(doc, tables, table, key, value, literal):
    """Add a new table after the last table of its deepest existing parent, before the comments that end it."""
    depth, parent = 0, doc
    for i in range(len(table) - 1, 0, -1):
        found = [item for k, item in tables.get(table[:i], []) if isinstance(item, Table) and not k.is_dotted()]
        if found:
            depth, parent = i, next((t for t in found if not t.is_super_table()), found[-1])
            break
    body = _body(parent)
    sibling = next((item for k, item in body if k is not None and _is_header(k, item)), None)
    if sibling is not None:
        hdr = sibling.trivia.indent.replace("\n", "")
        kv_indent = _kv_indent(sibling.value.body, hdr)
    elif parent is not doc and not parent.is_super_table():
        own = parent.trivia.indent.replace("\n", "")
        hdr = _kv_indent(body, own)
        kv_indent = hdr + hdr[len(own) :]
    else:
        hdr = kv_indent = ""
    moved = _detach_tail(body) if any(k is not None for k, item in body) else []
    item = _new_item(value, literal)
    item.trivia.indent = kv_indent
    node = Table(Container(True), Trivia(indent=("\n" if body else "") + hdr, trail="\n"), False, is_super_table=False)
    node.value.body.append((_key(key, literal), item))
    name = table[-1]
    for part in reversed(table[depth:-1]):
        outer = Table(Container(True), Trivia(indent="", trail=""), False, is_super_table=True)
        outer.value.body.append((_key(name, literal), node))
        node, name = outer, part
    body.append((_key(name, literal), node))
    body.extend(moved)
    return tomlkit.dumps(doc)


def set_values(text, path, edits, literal=False):
    """``text`` with every (table, key, value) of ``edits`` set; ConfigError when the result would be wrong."""
    if text and not text.endswith("\n"):
        text += "\n"
    for table, key, value in sorted(edits, key=lambda e: len(e[0])):  # parents first, so children nest in them
        text = _set(text, path, table, key, value, literal)
    try:
        data = tomlkit.parse(text).unwrap()
        if tomllib is not None:
            tomllib.loads(text)
        bad = [".".join(t + (k,)) for t, k, v in edits if lookup(data, t, k) != v]
    except (TOMLKitError, ValueError) as exc:
        bad = [str(exc)]
    if bad:
        raise ConfigError("Editing %s would not give the wanted values (%s); nothing was written." % (path, "; ".join(bad)))
    return text


# -- containerd -----------------------------------------------------------------


def containerd_version(data, path):
    """The config version: 1, 2, 3, or None for a file without any key."""
    if "version" not in data:
        return 1 if data else None
    version = data["version"]
    if isinstance(version, bool) or version not in (1, 2, 3):
        raise ConfigError("%s has config version %r; only versions 1, 2 and 3 are known." % (path, version))
    return version


def containerd_current(data, version):
    layout = CONTAINERD_LAYOUT[version or 2]
    current = {k: lookup(data, *layout[k]) for k in CONTAINERD_KEYS}
    current = {k: CONTAINERD_DEFAULTS[k] if _blank(v) is None else v for k, v in current.items()}
    current["config_version"] = version
    return current


def plan_containerd(text, path, settings):
    """Plan the edit of a containerd config.toml; ``text`` is None when the file is missing and no content is given.

    Returns dict(after, current, findings); ``after`` is None when nothing is to be written.
    """
    wanted = check_settings("containerd", settings)
    data = parse(text or "", path).unwrap()
    version = containerd_version(data, path)
    layout = CONTAINERD_LAYOUT[version or 2]
    edits = [layout[k] + (v,) for k, v in wanted.items() if not same(k, lookup(data, *layout[k]), v)]
    after = None
    if edits:
        if text is None:
            raise ConfigError("%s does not exist; set content to create it." % path)
        if version == 1:
            raise ConfigError("%s is a version 1 config, which this module reads but does not write; convert it with 'containerd config migrate' first." % path)
        if version is None:
            edits.insert(0, ((), "version", 2))
            version = 2
        after = set_values(text, path, edits, literal=version == 3)
        data = tomlkit.parse(after).unwrap()
    findings = []
    if version == 1:
        findings.append(
            finding(
                "warning",
                "config_version_1",
                "%s is a version 1 config (no version key), which containerd 2.x no longer reads; convert it with 'containerd config migrate'." % path,
            )
        )
    return dict(after=after, current=containerd_current(data, version), findings=findings)


# -- CRI-O ------------------------------------------------------------------------


def plan_crio(storage, crio, dropins, settings):
    """Plan the edits of storage.conf and crio.conf.

    ``storage`` and ``crio`` are (path, text or None), ``dropins`` a list of (path, text) in the order CRI-O
    applies them.  Returns dict(after=dict(storage=..., crio=...), current, findings); an ``after`` value is
    None when that file is not to be written.  Drop-ins are never edited.
    """
    wanted = check_settings("crio", settings)
    (spath, stext), (cpath, ctext) = storage, crio
    sdata = parse(stext or "", spath).unwrap()
    cdata = parse(ctext or "", cpath).unwrap()
    ddata = [(p, parse(t, p).unwrap()) for p, t in dropins]
    sedits, cedits = [], []
    for key, value in wanted.items():
        if key == "pause_image":
            if not same(key, lookup(cdata, CRIO_IMAGE_TABLE, key), value):
                cedits.append((CRIO_IMAGE_TABLE, key, value))
            continue
        if not same(key, lookup(sdata, STORAGE_TABLE, key), value):
            sedits.append((STORAGE_TABLE, key, value))
        explicit = lookup(cdata, CRIO_TABLE, CRIO_OVERRIDES[key])
        if explicit is not None and not same(key, explicit, value):
            cedits.append((CRIO_TABLE, CRIO_OVERRIDES[key], value))
    after = {}
    for role, (path, text, edits, option) in dict(storage=(spath, stext, sedits, "storage_content"), crio=(cpath, ctext, cedits, "content")).items():
        after[role] = None
        if edits:
            if text is None:
                raise ConfigError("%s does not exist; set %s to create it." % (path, option))
            after[role] = set_values(text, path, edits)
    if after["storage"] is not None:
        sdata = tomlkit.parse(after["storage"]).unwrap()
    if after["crio"] is not None:
        cdata = tomlkit.parse(after["crio"]).unwrap()
    return dict(after=after, **crio_effective(spath, sdata, cpath, cdata, ddata, wanted))


def crio_effective(spath, sdata, cpath, cdata, ddata, wanted):
    """CRI-O's effective values (storage.conf, then crio.conf, then drop-ins) and the findings about them."""
    findings = []
    current = {}
    layers = [(cpath, cdata)] + list(ddata)
    for key, crio_key in CRIO_OVERRIDES.items():
        stored = _blank(lookup(sdata, STORAGE_TABLE, key))
        stored = CRIO_DEFAULTS[key] if stored is None else stored
        value, source = stored, None
        for path, data in layers:
            if _blank(lookup(data, CRIO_TABLE, crio_key)) is not None:
                value, source = lookup(data, CRIO_TABLE, crio_key), path
        current[key] = value
        if source is not None and stored is not None and not same(key, value, stored):
            findings.append(
                finding(
                    "warning",
                    "crio_%s_mismatch" % crio_key,
                    "[crio] %s %r in %s differs from %s %r in %s: CRI-O uses %r, other containers/storage tools use %r."
                    % (crio_key, value, source, key, stored, spath, value, stored),
                )
            )
    current["pause_image"] = CRIO_DEFAULTS["pause_image"]
    for path, data in layers:
        if _blank(lookup(data, CRIO_IMAGE_TABLE, "pause_image")) is not None:
            current["pause_image"] = lookup(data, CRIO_IMAGE_TABLE, "pause_image")
    # what a drop-in can silently override: the requested values, and without a request crio.conf's own
    targets = {}
    for key in list(CRIO_OVERRIDES) + ["pause_image"]:
        table, crio_key = (CRIO_IMAGE_TABLE, key) if key == "pause_image" else (CRIO_TABLE, CRIO_OVERRIDES[key])
        if key in wanted:
            targets[key] = (table, crio_key, wanted[key], "requested here")
        elif _blank(lookup(cdata, table, crio_key)) is not None:
            targets[key] = (table, crio_key, lookup(cdata, table, crio_key), "set in %s" % cpath)
    for key, (table, crio_key, value, origin) in targets.items():
        for path, data in ddata:
            dropped = _blank(lookup(data, table, crio_key))
            if dropped is not None and not same(key, dropped, value):
                findings.append(
                    finding(
                        "warning",
                        "dropin_overrides",
                        "The drop-in %s sets [%s] %s = %r, which overrides the %s %r %s (drop-ins are not edited)."
                        % (path, ".".join(table), crio_key, dropped, key, value, origin),
                    )
                )
    return dict(current=current, findings=findings)


# -- findings ----------------------------------------------------------------------


def device_of(path):
    """st_dev of ``path`` or of its nearest existing parent; None when nothing can be read."""
    path = os.path.abspath(path)
    while True:
        try:
            return os.stat(path).st_dev
        except FileNotFoundError:
            if os.path.dirname(path) == path:
                return None
            path = os.path.dirname(path)
        except OSError:
            return None


def runtime_findings(runtime, current, changed, runtime_info, imagefs, device=device_of):
    """Compare the config with what the running runtime reports (its name, sandbox image and image filesystems).

    ``changed`` holds the settings this run changes; the runtime still runs with the old values until a restart.
    """
    later = " (a restart applies the new value)"
    name = (runtime_info.get("name") or "").lower()
    expected = "containerd" if runtime == "containerd" else "cri-o"
    endpoint = runtime_info.get("endpoint")
    if expected not in name:
        return [finding("info", "runtime_other", "The runtime at %s is %s, not %s; the runtime checks were skipped." % (endpoint, name or "unnamed", expected))]
    found = []
    root_key, image_key = ("root", "sandbox_image") if runtime == "containerd" else ("graphroot", "pause_image")
    mounts = [fs["mountpoint"] for fs in imagefs if fs.get("kind") == "image" and fs.get("mountpoint")]
    root = current.get(root_key)
    if mounts and root:
        root_dev = device(root)
        if root_dev is not None and all(device(m) != root_dev for m in mounts):
            found.append(
                finding(
                    "warning",
                    "root_not_on_imagefs",
                    "%s %s is not on the filesystem of the image filesystem %s that the runtime at %s reports%s."
                    % (root_key, root, ", ".join(mounts), endpoint, later if root_key in changed else ""),
                )
            )
    configured, running = current.get(image_key), runtime_info.get("sandbox_image")
    if configured and running and normalize_image_ref(configured) != normalize_image_ref(running):
        found.append(
            finding(
                "warning",
                "sandbox_image_mismatch",
                "The config sets %s %s but the runtime at %s uses %s%s." % (image_key, configured, endpoint, running, later if image_key in changed else ""),
            )
        )
    return found
