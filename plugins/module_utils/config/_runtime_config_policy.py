# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Storage settings of containerd and CRI-O in their TOML files: where they live, defaults, checks, findings.

Pure logic on file texts, nothing of Ansible: what containerd (config versions 1-4) and CRI-O
(storage.conf, crio.conf, drop-ins) mean by each setting. The TOML editing itself is _toml_edit's.
Every error is a ConfigError whose text is one sentence.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.kubenode.gc.plugins.module_utils._daemons import unexpanded
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _node_layouts as layouts
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import finding
from ansible_collections.kubenode.gc.plugins.module_utils.config._toml_edit import data as toml_data, lookup, set_values
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import is_image_ref, normalize_image_ref

CONTAINERD_PATH = "/etc/containerd/config.toml"
# k3s and RKE2 run their own containerd on <data-dir>/agent/etc/containerd/config.toml, which they generate at every
# start (from config.toml.tmpl next to it, when it exists), with --root <data-dir>/agent/containerd and
# --state /run/k3s/containerd on its command line; containerd's flags win over the file's root and state
DISTRO_CONTAINERD_PATHS = ("/var/lib/rancher/rke2/agent/etc/containerd/config.toml", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml")
# k0s runs containerd with --config /etc/k0s/containerd.toml (which it writes) --root /var/lib/k0s/containerd --state /run/k0s/containerd
K0S_CONTAINERD_CONFIG = "/etc/k0s/containerd.toml"
K0S_CONTAINERD_ROOT, K0S_CONTAINERD_STATE = "/var/lib/k0s/containerd", "/run/k0s/containerd"
CONTAINERD_PATHS = (CONTAINERD_PATH,) + DISTRO_CONTAINERD_PATHS + (K0S_CONTAINERD_CONFIG,)
_DISTRO_CONFIG = re.compile(r"^(?P<agent>.*/(?P<program>k3s|rke2)/agent)/etc/containerd/config\.toml$")
CRIO_PATH = "/etc/crio/crio.conf"
STORAGE_PATH = "/etc/containers/storage.conf"
DROPIN_DIR = "/etc/crio/crio.conf.d"

CONTAINERD_KEYS = ("root", "state", "snapshotter", "sandbox_image", "discard_unpacked_layers")
BOOL_KEYS = ("discard_unpacked_layers",)
# containerd 2.x (config version 3) pins every value of [plugins."io.containerd.cri.v1.images".pinned_images] (the
# image records of that exact name) when it pulls or imports an image and when it starts; the key "sandbox" also names
# the sandbox image. The pins of settings.pinned_images are the keys with this prefix: "kubenode-gc/<image>" = "<image>".
PINNED_IMAGES = "pinned_images"
PIN_KEY_PREFIX = "kubenode-gc/"
CRIO_KEYS = ("graphroot", "runroot", "imagestore", "driver", "pause_image")
PATH_KEYS = ("root", "state", "graphroot", "runroot", "imagestore")
DRIVERS = ("overlay", "vfs", "btrfs", "zfs", "devmapper", "aufs")

# containerd config version -> setting -> (table, key)
_CRI_V1 = ("plugins", "cri")
_CRI_V2 = ("plugins", "io.containerd.grpc.v1.cri")
_IMAGES_V3 = ("plugins", "io.containerd.cri.v1.images")
CONTAINERD_LAYOUT = {
    1: dict(root=((), "root"), state=((), "state"), snapshotter=(_CRI_V1 + ("containerd",), "snapshotter"), sandbox_image=(_CRI_V1, "sandbox_image"),
            discard_unpacked_layers=(_CRI_V1 + ("containerd",), "discard_unpacked_layers")),
    2: dict(root=((), "root"), state=((), "state"), snapshotter=(_CRI_V2 + ("containerd",), "snapshotter"), sandbox_image=(_CRI_V2, "sandbox_image"),
            discard_unpacked_layers=(_CRI_V2 + ("containerd",), "discard_unpacked_layers")),
    3: dict(root=((), "root"), state=((), "state"), snapshotter=(_IMAGES_V3, "snapshotter"), sandbox_image=(_IMAGES_V3 + ("pinned_images",), "sandbox"),
            discard_unpacked_layers=(_IMAGES_V3, "discard_unpacked_layers")),
}
# containerd 2.x reads a version 2 file by migrating it to version 3; its CRI images plugin takes these keys from
# [plugins."io.containerd.grpc.v1.cri".containerd] only when that table has a runtimes table (2.1.9, 2.2.7 and 2.3.4 alike,
# plugins/cri/images/plugin.go's migrateConfig returns before them otherwise: containerd config dump shows the default),
# and keeps what the file itself sets in [plugins."io.containerd.cri.v1.images"]: what 2.x reads from such a file
MIGRATED_WITH_RUNTIMES = ("snapshotter", "discard_unpacked_layers")
# containerd 2.3's version 4 moves only the server properties ([grpc], [ttrpc], [debug], [metrics]) into server plugins
# (its serviceMigrate); root, state and the CRI images plugin are where version 3 has them
CONTAINERD_LAYOUT[4] = CONTAINERD_LAYOUT[3]
CONFIG_VERSIONS = tuple(sorted(CONTAINERD_LAYOUT))
# None: the default depends on the runtime's version
CONTAINERD_DEFAULTS = dict(root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs", sandbox_image=None,
                           discard_unpacked_layers=False)

# CRI-O: storage.conf [storage] keys, the [crio] keys of crio.conf and its drop-ins that override them, and pause_image
STORAGE_TABLE = ("storage",)
CRIO_TABLE = ("crio",)
CRIO_IMAGE_TABLE = ("crio", "image")
CRIO_OVERRIDES = dict(graphroot="root", runroot="runroot", imagestore="imagestore", driver="storage_driver")
# setting -> cri-o's flag for it
CRIO_FLAG_OF = dict(graphroot="root", runroot="runroot", imagestore="imagestore", driver="storage-driver", pause_image="pause-image")
CRIO_DEFAULTS = dict(graphroot="/var/lib/containers/storage", runroot="/run/containers/storage", imagestore=None, driver=None, pause_image=None)

SNAPSHOTTER = re.compile(r"^[a-z0-9_.-]+$")


RUNTIME_NAMES = dict(containerd="containerd", crio="cri-o", docker="docker")  # runtime -> the name its CRI Version reports
# dockerd's configuration: read only (runtime_config never edits it)
DOCKER_CONFIG_PATH = "/etc/docker/daemon.json"
DOCKER_DATA_ROOT = "/var/lib/docker"


def runtime_of_name(name):
    """containerd, crio or docker from the name a runtime reports over CRI (cri-o is crio, cri-dockerd's docker is docker,
    anything else containerd); None when unknown."""
    if not name:
        return None
    if name.lower() == RUNTIME_NAMES["docker"]:
        return "docker"
    return "crio" if RUNTIME_NAMES["crio"] in name.lower() else "containerd"


def docker_data_root(flags, daemon_json):
    """(dockerd's data root, where it comes from): its ``--data-root`` flag (``flags``), else ``data-root`` (or the old
    ``graph``) of its daemon.json (``daemon_json``, parsed), else Docker's default; dockerd refuses to start with both."""
    if flags.get("data-root"):
        return flags["data-root"], "command_line"
    for key in ("data-root", "graph"):
        if isinstance(daemon_json, dict) and isinstance(daemon_json.get(key), str) and daemon_json[key]:
            return daemon_json[key], "config_file"
    return DOCKER_DATA_ROOT, "default"


def docker_findings(current, runtime_info, imagefs, realpath=os.path.realpath):
    """dockerd's data root against the image filesystem cri-dockerd reports to the kubelet (ImageFsInfo: the running
    dockerd's data root)."""
    endpoint = runtime_info.get("endpoint")
    name = (runtime_info.get("name") or "").lower()
    if name != RUNTIME_NAMES["docker"]:
        return [finding("info", "runtime_other", "The runtime at %s is %s, not docker; the runtime checks were skipped." % (endpoint, name or "unnamed"))]
    mounts = [fs["mountpoint"] for fs in imagefs if fs.get("kind") == "image" and fs.get("mountpoint")]
    root = current.get("data_root")
    if root and mounts and all(realpath(root) != realpath(m) for m in mounts):
        return [finding("warning", "data_root_not_imagefs", "dockerd's data root %s (%s) is not the image filesystem %s that cri-dockerd at %s "
                        "reports to the kubelet; dockerd runs with another data root until it restarts." % (
                            root, DOCKER_ROOT_SOURCES[current.get("data_root_source")], ", ".join(mounts), endpoint))]
    return []


DOCKER_ROOT_SOURCES = {"command_line": "its --data-root", "config_file": "data-root of its daemon.json", "default": "Docker's default"}


def detect_runtime(path, crio_options, exists=os.path.exists, runtime_name=None, strict=True):
    """containerd or crio: the one runtime detection of kubenode.gc.

    In order: the name the running runtime reports over CRI (``runtime_name``), options only cri-o has
    (``crio_options``), then the config files present (``exists``): containerd's (``path`` or its default)
    against cri-o's (storage.conf, crio.conf). When both or none exist, ``strict`` raises ConfigError;
    otherwise both give containerd and none gives None.
    """
    named = runtime_of_name(runtime_name)
    if named:
        return named
    if crio_options:
        return "crio"
    containerd = exists(path) if path else any(exists(p) for p in CONTAINERD_PATHS)
    crio = [f for f in (STORAGE_PATH, CRIO_PATH, DROPIN_DIR) if exists(f)]
    if containerd != bool(crio):
        return "containerd" if containerd else "crio"
    if not strict:
        return "containerd" if containerd else None
    if containerd:
        raise ConfigError("Both %s and %s exist, so the runtime is ambiguous; set runtime to containerd or crio." % (path or CONTAINERD_PATH, crio[0]))
    raise ConfigError(
        "None of %s, %s and %s exists, so the runtime cannot be detected; set runtime to containerd or crio."
        % (path or CONTAINERD_PATH, STORAGE_PATH, CRIO_PATH)
    )


# -- reading ------------------------------------------------------------------


def _blank(value):
    return None if value in ("", None) else value


def same(key, current, wanted):
    """Whether a file's value already is the wanted one (paths after normpath, overlay2 = overlay; a boolean only as a boolean)."""
    if isinstance(wanted, bool) or key in BOOL_KEYS:
        return isinstance(current, bool) and current == wanted
    if not isinstance(current, str):
        return False
    if key in PATH_KEYS:
        return os.path.normpath(current) == os.path.normpath(wanted)
    if key == "driver":
        return {"overlay2": "overlay"}.get(current, current) == wanted
    return current == wanted


def check_settings(runtime, settings):
    """The settings to enforce, checked and normalised; null values are left out."""
    keys = CONTAINERD_KEYS + (PINNED_IMAGES,) if runtime == "containerd" else CRIO_KEYS
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
        if key == PINNED_IMAGES:
            wanted[key] = check_pinned_images(value)
            continue
        if key in BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError("settings.%s must be true or false, got %r." % (key, value))
            wanted[key] = value
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
        elif key in ("sandbox_image", "pause_image") and not is_image_ref(value):
            raise ConfigError("settings.%s must be an image reference such as registry.k8s.io/pause:3.10, got %r." % (key, value))
        wanted[key] = value
    return wanted


def check_pinned_images(value):
    """settings.pinned_images: a list of image references, normalised as containerd names its images, sorted, unique."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError("settings.pinned_images must be a list of image references, got %r." % (value,))
    for ref in value:
        if not isinstance(ref, str) or not is_image_ref(ref) or ref.startswith("sha256:"):
            raise ConfigError("settings.pinned_images must hold image references such as docker.io/library/busybox:1.36, got %r." % (ref,))
    return sorted(set(normalize_image_ref(ref) for ref in value))


# -- containerd -----------------------------------------------------------------


def distro_containerd(path):
    """The command line k3s, RKE2 or k0s give containerd when ``path`` is their containerd config, else None:
    dict(program, who, root, state) (see plan_containerd's ``command_line``)."""
    match = _DISTRO_CONFIG.match(path or "")
    if match:
        program = "RKE2" if match.group("program") == "rke2" else "k3s"
        return dict(program=program, who="%s runs containerd with" % program, root=match.group("agent") + "/containerd", state="/run/k3s/containerd")
    if path and path.endswith(K0S_CONTAINERD_CONFIG):
        return dict(program="k0s", who="k0s runs containerd with", root=K0S_CONTAINERD_ROOT, state=K0S_CONTAINERD_STATE)
    return None


def containerd_path(exists=os.path.exists):
    """containerd's config file when none is given: /etc/containerd/config.toml, else RKE2's or k3s's when it exists."""
    return next((p for p in CONTAINERD_PATHS if exists(p)), CONTAINERD_PATH)


def containerd_version(data, path):
    """The config version: 1 to 4, or None for a file without any key."""
    if "version" not in data:
        return 1 if data else None
    version = data["version"]
    if isinstance(version, bool) or version not in CONFIG_VERSIONS:
        raise ConfigError("%s has config version %r; only versions 1 to 4 are known." % (path, version))
    return version


# -- generated files ----------------------------------------------------------------

MCO_CURRENT_CONFIG = "/etc/machine-config-daemon/currentconfig"
_TEMPLATE = re.compile(r"\b(?:use|edit)\s+(\S+\.tmpl)\b", re.I)


def mco_files(text):
    """The paths the OpenShift Machine Config Operator writes, from the MachineConfig in MCO_CURRENT_CONFIG (None: not OpenShift)."""
    if not text:
        return set()
    try:
        data = json.loads(text)
        files = data["spec"]["config"]["storage"].get("files") or []
        return {f["path"] for f in files if isinstance(f, dict) and isinstance(f.get("path"), str)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return set()


def generated_by(path, text, mco_paths=(), os_name=None):
    """Why ``path`` is generated (one clause naming what to edit instead), or None.

    A header comment (the comment lines the file starts with) saying DO NOT EDIT or "generated by the Machine Config
    Operator", or the file being one the Machine Config Operator writes (``mco_paths``); then what _node_layouts knows
    (Bottlerocket, GKE, k0s, MicroK8s, /run)."""
    header = []
    for line in (text or "").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        header.append(line.strip().lstrip("#").strip())
    head = " ".join(header)
    distro = distro_containerd(path)
    if head.lower().startswith("managed by kubenode.gc"):
        return None  # our own drop-ins (kubenode.gc.image_pin, the crio_storage role): read as any other, never a finding
    if "do not edit" in head.lower():
        template = _TEMPLATE.search(head)
        if template:
            name = os.path.join(os.path.dirname(path), template.group(1)) if "/" not in template.group(1) else template.group(1)
            return "its header says it is generated (DO NOT EDIT)%s; put the settings in %s instead (%s)" % (
                " by %s at every start" % distro["program"] if distro else "", name,
                "a copy of the generated file with your changes" if distro else "the template it names")
        return "its header says it is generated (DO NOT EDIT); change what generates it instead"
    if "machine config operator" in head.lower() or path in mco_paths:
        return ("the OpenShift Machine Config Operator writes it (and puts it back); change it through a ContainerRuntimeConfig or "
                "MachineConfig instead")
    return layouts.regenerated(path, text, os_name)


def generated_check(files, writes, mco_paths=(), os_name=None):
    """Refuse to write any generated file: ``files`` path -> text, ``writes`` the paths to be written."""
    for path in writes:
        why = generated_by(path, files.get(path), mco_paths, os_name)
        if why:
            raise ConfigError("Not editing %s: %s; nothing was changed." % (path, why))


def generated_findings(files, mco_paths=(), os_name=None):
    """A generated_file warning per file read that something else generates."""
    out = []
    for path, text in files.items():
        why = generated_by(path, text, mco_paths, os_name) if text is not None else None
        if why:
            out.append(finding("warning", "generated_file", "%s is generated: %s." % (path, why)))
    return out


def containerd_current(data, version, imports=()):
    """The effective values of the main file's ``data`` merged with its ``imports`` (see containerd_winners)."""
    winners = containerd_winners([(None, data)] + list(imports), version)
    current = {k: CONTAINERD_DEFAULTS[k] if _blank(v) is None else v for k, (v, source) in winners.items()}
    current.update((k, None) for k, v in current.items() if isinstance(v, str) and unexpanded(v))  # a template's ${VAR} is no value
    if version in (3, 4):
        current[PINNED_IMAGES] = sorted(_our_pins(data).values())
    current["config_version"] = version
    return current


# -- containerd imports -----------------------------------------------------------
#
# containerd (1.6, 1.7 and 2.x alike) loads the main file, then the files its ``imports`` name, then the files
# those import, breadth first, each path once; a later file wins. An entry is cleaned and, when relative, joined
# to the importing file's directory; an entry containing '*' is a glob (Go's filepath.Glob: sorted, '*' matches
# dot files too), a glob matching nothing adds nothing, and a missing file stops containerd from starting.
# The merge differs: containerd 1.x replaces a whole plugin table (plugins.<id>) of an earlier file with an
# import's, while 2.x merges tables key by key; top-level keys such as root and state are overridden by a
# non-empty value in both. Version 1 and 2 files are merged as 1.x does, version 3 files as 2.x does.


def containerd_imports(data, path):
    """The ``imports`` entries of a parsed containerd file, a list of strings."""
    imports = data.get("imports")
    if imports is None:
        return []
    if not isinstance(imports, list) or not all(isinstance(entry, str) for entry in imports):
        raise ConfigError("%s has imports = %r; containerd needs a list of file paths there." % (path, imports))
    return imports


def resolve_import(parent, entry):
    """(path, is_glob) of one ``imports`` entry of the file ``parent``, as containerd resolves it."""
    path = os.path.normpath(os.path.join(os.path.dirname(parent), entry or "."))
    return path, "*" in path


def load_containerd_imports(path, data, read_text, glob):
    """[(path, data)] of the files containerd imports for the main file ``path`` (parsed ``data``), in its order.

    ``read_text(path)`` gives a file's text or None when missing, ``glob(pattern)`` the sorted matching paths.
    A missing import or one that is not TOML raises ConfigError naming it.
    """
    loaded, layers = {path}, []
    pending = [(p, path) for p in _import_paths(path, data, glob)]
    while pending:
        file, importer = pending.pop(0)
        if file in loaded:
            continue
        text = read_text(file)
        if text is None:
            raise ConfigError("%s imports %s, which does not exist, so containerd would not start; create it or remove the import." % (importer, file))
        parsed = toml_data(text, file)
        loaded.add(file)
        layers.append((file, parsed))
        pending += [(p, file) for p in _import_paths(file, parsed, glob)]
    return layers


def _import_paths(parent, data, glob):
    out = []
    for entry in containerd_imports(data, parent):
        resolved, is_glob = resolve_import(parent, entry)
        out += glob(resolved) if is_glob else [resolved]
    return out


def containerd_winners(layers, version):
    """setting -> (raw value, path of the file it comes from) over ``layers`` [(path, data)], main file first.

    The main file's path may be None. A value of None with an import's path means that import replaced the
    setting's whole plugin table without setting it (containerd 1.x), so the runtime's default applies.
    """
    layout = CONTAINERD_LAYOUT[version or 2]
    whole_tables = version in (None, 1, 2)
    winners = {}
    for key in CONTAINERD_KEYS:
        table, name = layout[key]
        (main_path, main), imported = layers[0], layers[1:]
        value, source = lookup(main, table, name), main_path
        for path, data in imported:
            if table and whole_tables:
                if isinstance(lookup(data, table[:1], table[1]), dict):
                    value, source = lookup(data, table, name), path
            elif (_blank(lookup(data, table, name)) if not table else lookup(data, table, name)) is not None:
                value, source = lookup(data, table, name), path
        winners[key] = (value, source)
    return winners


def _toml_table(table):
    return "[%s]" % ".".join(part if re.match(r"^[A-Za-z0-9_-]+$", part) else "'%s'" % part for part in table)


def _toml_key(table, name):
    return "%s %s" % (_toml_table(table), name) if table else name


def import_overrides(path, data, imports, version, wanted):
    """Where an import overrides a setting requested in ``wanted`` or set in the main file: [(key, message)]."""
    out = []
    layout = CONTAINERD_LAYOUT[version or 2]
    winners = containerd_winners([(path, data)] + list(imports), version)
    for key in CONTAINERD_KEYS:
        table, name = layout[key]
        value, source = winners[key]
        if source == path:
            continue
        if key in wanted:
            target, origin = wanted[key], "settings.%s %r for %s" % (key, wanted[key], path)
        elif _blank(lookup(data, table, name)) is not None:
            target, origin = lookup(data, table, name), "%s %r set in %s" % (key, lookup(data, table, name), path)
        else:
            continue
        effective = CONTAINERD_DEFAULTS[key] if _blank(value) is None else value
        if same(key, effective, target):
            continue
        if table and version in (None, 1, 2) and lookup(dict(imports)[source], table, name) is None:
            what = "replaces the whole %s table without %s (containerd 1.x does not merge plugin tables of imports)" % (_toml_table(table[:2]), name)
            uses = "containerd uses %s" % ("its default" if effective is None else repr(effective))
        else:
            what = "sets %s = %r" % (_toml_key(table, name), value)
            uses = "imports win over the main file"
        out.append((key, "The import %s %s, which overrides the %s (%s)" % (source, what, origin, uses)))
    return out


def _our_pins(data):
    """{key: image} of the pinned_images entries settings.pinned_images manages in a version 3 config."""
    table = lookup(data, _IMAGES_V3, PINNED_IMAGES)
    return {k: v for k, v in (table if isinstance(table, dict) else {}).items() if k.startswith(PIN_KEY_PREFIX)}


def _pin_edits(data, path, version, pins):
    """The edits that make the kubenode-gc/ entries of pinned_images exactly ``pins`` (a version 3 config only)."""
    if version not in (3, 4):
        if not pins:
            return []
        raise ConfigError(
            "settings.pinned_images needs a version 3 config (containerd 2.x); %s %s."
            % (path, "has no version key" if version is None else "is a version %d config, in which containerd pins only its sandbox image" % version)
        )
    table = _IMAGES_V3 + (PINNED_IMAGES,)
    ours = _our_pins(data)
    wanted = {PIN_KEY_PREFIX + ref: ref for ref in pins}
    edits = [(table, k, v) for k, v in sorted(wanted.items()) if ours.get(k) != v]
    return edits + [(table, k, None) for k in sorted(ours) if k not in wanted]


def _migrated(data):
    """Whether containerd 2.x takes MIGRATED_WITH_RUNTIMES from a version 2 file's CRI table: only when it has a runtimes table."""
    return isinstance(lookup(data, _CRI_V2 + ("containerd",), "runtimes"), dict)


# the settings that kubenode.gc writes, in a version 2 file, also where containerd 2.x reads them when it would drop them
WRITTEN_FOR_CONTAINERD_2 = ("discard_unpacked_layers",)


def _for_containerd_2(data, version, wanted):
    """The edits that also put the settings of WRITTEN_FOR_CONTAINERD_2 where containerd 2.x reads them from a version 2 file
    (or a new one) whose CRI table has no runtimes table: [plugins."io.containerd.cri.v1.images"], which containerd 1.x
    does not read (its config dump and its start accept the table)."""
    if version not in (None, 2) or _migrated(data):
        return []
    return [(_IMAGES_V3, k, wanted[k]) for k in WRITTEN_FOR_CONTAINERD_2 if k in wanted and not same(k, lookup(data, _IMAGES_V3, k), wanted[k])]


def dropped_by_containerd_2(path, data, version):
    """A dropped_by_containerd_2 finding (severity info; the run makes it a warning when containerd 2.x runs) per setting of
    MIGRATED_WITH_RUNTIMES that a version 2 file sets in its CRI table, without a runtimes table there, to another value
    than containerd 2.x then uses ([plugins."io.containerd.cri.v1.images"]'s, else its default): 2.x drops it when it
    migrates the file."""
    if version != 2 or _migrated(data):
        return []
    out = []
    for key in MIGRATED_WITH_RUNTIMES:
        table, name = CONTAINERD_LAYOUT[2][key]
        value = lookup(data, table, name)
        images = lookup(data, _IMAGES_V3, name)
        uses = CONTAINERD_DEFAULTS[key] if _blank(images) is None else images
        if _blank(value) is None or same(key, uses, value):
            continue  # not set there, or 2.x uses the same value anyway (its default, or what the images table says)
        out.append(finding("info", DROPPED_CODE, "%s sets %s = %s in %s, which has no runtimes table, so containerd 2.x drops it when it migrates "
                           "this version 2 file and uses %s; set it in %s too, or migrate the file to version 3 (containerd config migrate)."
                           % (path, name, _shown(value), _toml_table(table), _shown(uses), _toml_table(_IMAGES_V3))))
    return out


DROPPED_CODE = "dropped_by_containerd_2"


def major_version(version):
    """The major version of a runtime's version string ("1.7.24~ds1", "v2.3.4"), 0 when it has none."""
    match = re.match(r"^v?(\d+)\.", str(version or ""))
    return int(match.group(1)) if match else 0


def _shown(value):
    """A setting's value in a message: booleans as TOML writes them, strings quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def fixed_by_command_line(wanted, command_line):
    """The settings of ``wanted`` (checked settings) that the runtime's command line sets to another value."""
    return [k for k in wanted if command_line and command_line.get(k) and not same(k, command_line[k], wanted[k])]


def plan_containerd(text, path, settings, imports=(), command_line=None):
    """Plan the edit of a containerd config.toml; ``text`` is None when the file is missing and no content is given.

    ``imports`` are the [(path, data)] containerd imports for it (load_containerd_imports), in its order; the
    current values are the merged ones. A requested setting an import overrides with another value raises
    ConfigError (the main file is not edited then); an import overriding a value of the main file is a finding.
    ``command_line`` is what containerd's command line says (dict(who, root, state), each flag optional; ``who`` such
    as "containerd (pid 12) runs with"): its --root and --state win over the file. None: what distro_containerd knows.
    Returns dict(after, current, findings); ``after`` is None when nothing is to be written.
    """
    wanted = check_settings("containerd", settings)
    data = toml_data(text or "", path)
    version = containerd_version(data, path)
    distro = distro_containerd(path) if command_line is None else command_line
    fixed = fixed_by_command_line(wanted, distro)
    if fixed:
        raise ConfigError("settings.%s cannot take effect: %s --%s %s, which wins over %s; nothing was changed." % (
            fixed[0], distro["who"], fixed[0], distro[fixed[0]], path))
    overrides = import_overrides(path, data, imports, version, wanted)
    refused = [message for key, message in overrides if key in wanted]
    if refused:
        raise ConfigError("%s; nothing was changed, edit or remove that import first." % refused[0])
    layout = CONTAINERD_LAYOUT[version or 2]
    pins = wanted.pop(PINNED_IMAGES, None)
    edits = [layout[k] + (v,) for k, v in wanted.items() if not same(k, lookup(data, *layout[k]), v)]
    edits += _for_containerd_2(data, version, wanted)
    if pins is not None:
        edits += _pin_edits(data, path, version, pins)
    after = None
    if edits:
        if text is None:
            raise ConfigError("%s does not exist; set content to create it." % path)
        if version == 1:
            raise ConfigError("%s is a version 1 config, which this module reads but does not write; convert it with 'containerd config migrate' first." % path)
        if version is None:
            edits.insert(0, ((), "version", 2))
            version = 2
        after = set_values(text, path, edits, literal=version >= 3)
        data = toml_data(after, path)
    findings = []
    if version == 1:
        findings.append(
            finding(
                "warning",
                "config_version_1",
                "%s is a version 1 config (no version key), which containerd 2.x no longer reads; convert it with 'containerd config migrate'." % path,
            )
        )
    findings += [finding("warning", "import_overrides", message + ".") for key, message in import_overrides(path, data, imports, version, wanted)]
    findings += dropped_by_containerd_2(path, data, version)
    winners = containerd_winners([(path, data)] + list(imports), version)
    placeholders = [(k, v) for k, (v, source) in winners.items() if isinstance(v, str) and unexpanded(v)]
    if placeholders:
        shown = ", ".join("%s = %s" % kv for kv in placeholders)
        findings.append(finding("info", "template_placeholder", "%s is a template: %s %s a placeholder filled in when the file is rendered, so no "
                                "value is reported for %s." % (path, shown, "is" if len(placeholders) == 1 else "are",
                                                               " and ".join(k for k, v in placeholders))))
    if version == 4:
        findings.append(finding("info", "config_version_4", "%s is a version 4 config, which containerd reads from 2.3 on (older versions refuse "
                                "to start with it); root, state, the snapshotter and the pinned images are where version 3 has them." % path))
    current = containerd_current(data, version, imports)
    for key in ("root", "state"):
        if distro and distro.get(key):
            if not same(key, current[key] or "", distro[key]):
                findings.append(finding("info", "%s_from_command_line" % key, "%s --%s %s, so that is its %s (%s alone gives %r)." % (
                    distro["who"], key, distro[key], key, path, current[key])))
            current[key] = distro[key]
    return dict(after=after, current=current, findings=findings)


# -- CRI-O ------------------------------------------------------------------------


def plan_crio(storage, crio, dropins, settings, command_line=None):
    """Plan the edits of storage.conf and crio.conf.

    ``storage`` and ``crio`` are (path, text or None), ``dropins`` a list of (path, text) in the order CRI-O
    applies them.  Returns dict(after=dict(storage=..., crio=...), current, findings); an ``after`` value is
    None when that file is not to be written.  Drop-ins are never edited. ``command_line`` is what cri-o's command
    line says (dict(who, and any of graphroot, runroot, driver, imagestore, pause_image)): it wins over every file.
    """
    wanted = check_settings("crio", settings)
    fixed = fixed_by_command_line(wanted, command_line)
    if fixed:
        raise ConfigError("settings.%s cannot take effect: %s --%s %s, which wins over the files; nothing was changed." % (
            fixed[0], command_line["who"], CRIO_FLAG_OF[fixed[0]], command_line[fixed[0]]))
    (spath, stext), (cpath, ctext) = storage, crio
    sdata = toml_data(stext or "", spath)
    cdata = toml_data(ctext or "", cpath)
    ddata = [(p, toml_data(t, p)) for p, t in dropins]
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
            if text is None and role == "crio" and dropins:
                text = ""  # a package layout (drop-ins only): crio.conf is created with the edited keys, read before the drop-ins
            if text is None:
                raise ConfigError("%s does not exist; set %s to create it." % (path, option))
            after[role] = set_values(text, path, edits)
    if after["storage"] is not None:
        sdata = toml_data(after["storage"], spath)
    if after["crio"] is not None:
        cdata = toml_data(after["crio"], cpath)
    planned = crio_effective(spath, sdata, cpath, cdata, ddata, wanted)
    for key, value in (command_line or {}).items():
        if key in CRIO_FLAG_OF and value:
            if not same(key, planned["current"][key] or "", value):
                planned["findings"].append(finding("info", "%s_from_command_line" % key, "%s --%s %s, so that is its %s (the files give %r)." % (
                    command_line["who"], CRIO_FLAG_OF[key], value, key, planned["current"][key])))
            planned["current"][key] = value
    return dict(after=after, **planned)


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
    expected = RUNTIME_NAMES[runtime]
    endpoint = runtime_info.get("endpoint")
    if expected not in name:
        return [finding("info", "runtime_other", "The runtime at %s is %s, not %s; the runtime checks were skipped." % (endpoint, name or "unnamed", expected))]
    found = []
    root_key, image_key = ("root", "sandbox_image") if runtime == "containerd" else ("graphroot", "pause_image")
    # which configured path must be on which filesystem the runtime reports; with a CRI-O imagestore
    # (a split image filesystem) images live there and containers under graphroot
    places = [(root_key, "image")]
    if runtime != "containerd" and current.get("imagestore"):
        places = [("imagestore", "image"), (root_key, "container")]
    for key, kind in places:
        mounts = [fs["mountpoint"] for fs in imagefs if fs.get("kind") == kind and fs.get("mountpoint")]
        if not mounts and kind == "container":
            kind, mounts = "image", [fs["mountpoint"] for fs in imagefs if fs.get("kind") == "image" and fs.get("mountpoint")]
        path = current.get(key)
        if not (mounts and path):
            continue
        path_dev = device(path)
        if path_dev is not None and all(device(m) != path_dev for m in mounts):
            found.append(
                finding(
                    "warning",
                    "root_not_on_imagefs",
                    "%s %s is not on the filesystem of the %s filesystem %s that the runtime at %s reports%s."
                    % (key, path, kind, ", ".join(mounts), endpoint, later if key in changed else ""),
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


def _status_config(info):
    try:
        config = json.loads((info or {}).get("config") or "null")
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


# where the running runtime says what it uses: containerd in its verbose CRI Status info, cri-o through its own HTTP API
# (GET /config, put under this key of the info by _runtime_config.query_runtime): its Status info names only the pause
# image (sandboxImage), which the sandbox_image_mismatch check compares
CRIO_API_CONFIG = "crio_api_config"
STATUS_SOURCE = dict(containerd="its CRI status", crio="its configuration (GET /config)")


def status_reported(runtime, info):
    """What the running runtime says of the settings; {} when it says nothing.

    containerd's verbose CRI Status info names its root (containerdRootDir) and, through its CRI plugin's state
    directory (stateDir, <state>/io.containerd...), its state; cri-o's configuration (CRIO_API_CONFIG) its [crio]
    root, runroot, storage_driver and imagestore (graphroot, runroot, driver, imagestore; "" for no imagestore)."""
    if runtime != "containerd":
        return _crio_reported((info or {}).get(CRIO_API_CONFIG))
    config = _status_config(info)
    reported = {}
    if isinstance(config.get("containerdRootDir"), str) and config["containerdRootDir"]:
        reported["root"] = config["containerdRootDir"]
    state_dir = config.get("stateDir")
    if isinstance(state_dir, str) and os.path.basename(state_dir).startswith("io.containerd."):
        reported["state"] = os.path.dirname(state_dir)
    # containerd 1.x's CRI plugin config (2.x's CRI status holds its runtime config only, not the images plugin's)
    cri = config.get("containerd") if isinstance(config.get("containerd"), dict) else {}
    if isinstance(cri.get("discardUnpackedLayers"), bool):
        reported["discard_unpacked_layers"] = cri["discardUnpackedLayers"]
    return reported


def _crio_reported(text):
    if not text:
        return {}
    try:
        data = toml_data(text, "cri-o's configuration")
    except ConfigError:
        return {}
    reported = {}
    for key, crio_key in CRIO_OVERRIDES.items():
        value = lookup(data, CRIO_TABLE, crio_key)
        if isinstance(value, str) and (value or key == "imagestore"):
            reported[key] = value
    return reported


def status_findings(runtime, current, changed, info, endpoint):
    """A daemon_differs_from_files warning per setting the running runtime reports (status_reported) with another value
    than the files and its command line give (an imagestore against none, either way)."""
    out = []
    for key, value in status_reported(runtime, info).items():
        if key in BOOL_KEYS:
            given = current.get(key)
            if isinstance(given, bool) and given != value:
                later = " (a restart applies the new value)" if key in changed else ""
                out.append(finding("warning", "daemon_differs_from_files", "The runtime at %s reports %s %s in %s, but its files give %s%s."
                                   % (endpoint, key, _shown(value), STATUS_SOURCE[runtime], _shown(given), later)))
            continue
        given = current.get(key) or ("" if key == "imagestore" else None)
        if given is not None and (given or value) and not same(key, given, value):
            later = " (a restart applies the new value)" if key in changed else ""
            out.append(finding("warning", "daemon_differs_from_files", "The runtime at %s reports %s %s in %s, but its files and "
                               "command line give %s%s." % (endpoint, key, value or "none", STATUS_SOURCE[runtime], given or "none", later)))
    return out
