#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: runtime_config
short_description: Read, audit and set the storage settings of containerd and CRI-O in their TOML files; report Docker Engine's data root
version_added: 0.1.0
description:
  - Reads the storage settings of the container runtime (where it keeps images and state, which snapshotter or storage driver
    it uses, which sandbox image it pins) from its configuration files, reports their effective values and findings about
    them, and with O(settings) sets them.
  - Edits keep comments, layout, quoting and every other key of the file; only keys whose value differs are written
    (paths are compared after normalisation), so a second run reports no change. Missing tables are created after the
    last table of their parent.
  - >-
    Every byte outside the edited keys is kept: only the lines of the keys that change (and the header of a table that
    has to be added) are written anew; every other line stays as written, with its indentation, and so do the file's
    line endings (a CRLF file stays CRLF) and a UTF-8 byte order mark. After rendering, the module compares every other
    line with the original; if the edit would change any of them, the task fails with one sentence naming the line and
    writes nothing. A file mixing CRLF and LF line endings is read but not rewritten.
  - "containerd: C(/etc/containerd/config.toml) in config version 2 (containerd 1.x, C(version = 2)), 3 (containerd 2.x,
    C(version = 3)) or 4 (containerd 2.3 and later, C(version = 4)). A file without C(version) is version 1: it is read,
    but not written. An empty or new file that gets settings starts with C(version = 2) unless O(content) says otherwise."
  - "containerd config version 4 is read and edited as containerd 2.3 reads it: its migration from version 3
    (C(serviceMigrate)) only moves the server properties (C([grpc]), C([ttrpc]), C([debug]), C([metrics])) into server
    plugins, so C(root), C(state), the snapshotter and C(pinned_images) of C(io.containerd.cri.v1.images) are where version 3
    has them, and imports merge key by key. A C(config_version_4) finding says that containerd before 2.3 refuses the file."
  - "k3s and RKE2: their containerd reads C(<data-dir>/agent/etc/containerd/config.toml)
    (C(/var/lib/rancher/k3s/...), C(/var/lib/rancher/rke2/...)), which they generate at every start from
    C(config.toml.tmpl) next to it when that exists, and runs with C(--root <data-dir>/agent/containerd) and
    C(--state /run/k3s/containerd), which win over the file. RV(current) reports those (with C(root_from_command_line)
    and C(state_from_command_line) findings when the file says otherwise), a C(root) or C(state) setting fails, and the
    generated file is never edited (see below)."
  - "Docker Engine (O(runtime=docker), cri-dockerd on the CRI socket): read only. The module reports dockerd's data root - the
    image filesystem's root - from the running dockerd (the one listening on the socket the running cri-dockerd's
    C(--docker-endpoint) names, else C(/var/run/docker.sock); else C(docker.service)'s command line): its C(--data-root),
    else C(data-root) of its C(daemon.json) (its C(--config-file), else C(/etc/docker/daemon.json), or O(path)), else
    C(/var/lib/docker). With O(query_runtime) a C(data_root_not_imagefs) finding says when the image filesystem
    cri-dockerd reports to the kubelet (the running dockerd's data root) is another directory. Editing dockerd's
    configuration is out of scope: O(settings) and O(content) fail with one sentence and nothing is written."
  - "k0s: its containerd reads C(/etc/k0s/containerd.toml) (which k0s writes, C(# k0s_managed=true)) and its imports, with
    C(--root /var/lib/k0s/containerd) and C(--state /run/k0s/containerd)."
  - "Generated files are never edited: a file whose header (the comment lines it starts with) says C(DO NOT EDIT), or
    that the OpenShift Machine Config Operator writes (its header says so, or it is a file of the MachineConfig in
    C(/etc/machine-config-daemon/currentconfig)), fails the task when it would be written, naming what to edit instead
    (the C(.tmpl) template the header names; a ContainerRuntimeConfig or MachineConfig), and nothing is written. So does
    a file that GKE's C(configure.sh) writes at every boot (containerd's C(config.toml) on a node with
    C(/home/kubernetes/bin/configure.sh) or C(configure-helper.sh)), k0s's C(containerd.toml) (put settings in
    C(/etc/k0s/containerd.d/) instead), MicroK8s's C(args/containerd.toml) (edit C(args/containerd-template.toml) next to it,
    which the module then accepts as O(path)), any file on Bottlerocket (C(ID=bottlerocket) in C(/etc/os-release); change
    its settings with C(apiclient set)) and a file under C(/run). Read-only, each such file read (drop-ins included) is a
    C(generated_file) warning."
  - "containerd C(imports) are read as containerd reads them: breadth first (the main file, its imports, then what they
    import), each file once, relative paths against the importing file's directory, an entry with C(*) a sorted glob;
    a later file wins. Version 1 and 2 files are merged as containerd 1.x does (an imported C([plugins.<id>]) table
    replaces the earlier one whole), version 3 files as 2.x does (key by key). RV(current) is the merged result. Imports
    are never edited."
  - "CRI-O: the O(settings) C(graphroot), C(runroot), C(imagestore) and C(driver) go to the C([storage]) table of
    C(/etc/containers/storage.conf), C(pause_image) to C([crio.image]) of C(/etc/crio/crio.conf).
    C([crio]) C(root), C(runroot), C(imagestore) and C(storage_driver) in C(crio.conf) override C(storage.conf) for
    CRI-O; when C(crio.conf) sets one of them explicitly, setting the matching storage key updates it too, so both agree.
    Drop-ins are read as CRI-O reads them - every file in O(dropin_dir) whatever its name (OpenShift's C(00-default) has
    no extension), subdirectories included, in lexical order (Go's C(filepath.Walk)), over C(crio.conf) - for the
    effective values and findings, and never edited."
  - "CRI-O package layout (C(/etc/crio/crio.conf.d/10-crio.conf) and no C(crio.conf)): when O(dropin_dir) has files and
    C(crio.conf) does not exist, a C(pause_image) setting creates C(crio.conf) holding only that key (with O(mode)); CRI-O
    reads it before its drop-ins, so a drop-in setting C(pause_image) still wins (C(dropin_overrides))."
  - With O(query_runtime), the runtime's CRI socket is asked for its sandbox image and image filesystem, to tell whether the
    configuration matches the running runtime. The runtime reads its configuration only when it starts; restart it to
    apply a change.
  - >-
    With O(query_runtime), the running runtime is asked first - the process listening on the CRI socket in use (its inode
    in C(/proc/net/unix), then the C(socket:[inode]) links of C(/proc/<pid>/fd)). Its command line
    (C(/proc/<pid>/cmdline), where systemd has already expanded the unit's C(Environment=) and C(EnvironmentFile=)
    variables) and environment are the truth - containerd's C(--config)/C(-c), C(--root) and C(--state); cri-o's
    C(--config), C(--config-dir), C(--root), C(--runroot), C(--pause-image), C(--storage-driver) and C(--imagestore) (or their
    C(CONTAINER_*) environment variables) and C(CONTAINERS_STORAGE_CONF). They give the runtime, the files read when
    O(runtime), O(path), O(dropin_dir) and O(storage_path) are not given, and the values of RV(current) the flags set
    (with C(<setting>_from_command_line) findings when the files say otherwise). The running runtime also says what it
    uses - containerd's CRI status its root and state; cri-o's configuration, from its own HTTP API on the same socket
    (C(GET /config), what C(crio status config) shows), its C(root), C(runroot), C(storage_driver) and C(imagestore)
    (cri-o's CRI status names only its runtime table and its pause image) - and where that differs from the files and
    command line, as after an edit not yet applied by a restart, a C(daemon_differs_from_files) warning names both values
    (RV(current) keeps what the files and command line give, which a restart applies). The pause image or sandbox image
    the CRI status names is compared by the C(sandbox_image_mismatch) check. The module must run as root (C(become)) to
    read another user's process.
  - >-
    Only root's runtime is believed: the process listening on the socket counts only when its real and effective uid are 0
    and its executable (C(/proc/<pid>/exe)) is a regular file owned by root that neither group nor others may write (of
    several holding the socket, the one of the runtime's systemd unit, such as C(containerd.service) or C(crio.service),
    wins). Another listener is ignored - its command line is not believed, the files are read as when no runtime runs - and
    named (pid, uid, executable) in an C(untrusted_daemon_process) warning.
  - >-
    A file is written only when nothing on its path belongs to another user - every directory and link from C(/) to it
    owned by root, no directory writable by group or others (a sticky one excepted, where the file itself must be root's) -
    as systemd's C(chase()) with C(CHASE_SAFE) resolves it; otherwise the run fails with one sentence naming the directory
    or link and its owner before any file is written. Such a file is still read, with an C(untrusted_path) warning.
  - >-
    Edits that cannot take effect are refused with one sentence and nothing is written - a file that is not the one the
    runtime reads (O(path), O(storage_path) or O(dropin_dir) other than its command line's; read-only, a
    C(daemon_reads_other_file) warning); a setting that a flag of its command line sets; and a file that something else
    writes again (see below).
  - >-
    When no runtime runs (a node image being built) or O(query_runtime) is false, the node's files say how the runtime
    is started - MicroK8s's C(/var/snap/microk8s/current/args/containerd) (one flag per line, its snap's variables
    expanded), else the runtime's systemd unit and drop-ins (C(containerd.service), C(crio.service) in
    C(/etc/systemd/system), C(/run/systemd/system), C(/usr/lib/systemd/system), C(/lib/systemd/system)) with their
    C(Environment=) and C(EnvironmentFile=) variables expanded, as Flatcar's C(CONTAINERD_CONFIG) names
    C(/usr/share/containerd/config.toml); k3s, RKE2 and k0s start containerd with flags of their own (see below). A value
    that still holds a C($VAR) or C(${VAR}) placeholder (a template's, such as MicroK8s's C(${SNAPSHOTTER})) is no
    value - RV(current) reports V(null) for it, with a C(template_placeholder) finding.
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ACTIONGROUP_CRI
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target.
    support: full
    details:
      - Reports the files that would be written, the values and findings they would give, and writes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details:
      - One before/after diff per file that changes, with secret values redacted (see RV(diff)).
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  runtime:
    description:
      - The container runtime whose configuration to manage.
      - When not set, the runtime listening on the CRI socket (with O(query_runtime)); else V(crio) if O(storage_path),
        O(storage_content) or O(dropin_dir) is given; otherwise V(containerd) when its systemd unit or MicroK8s's arguments
        file names its C(--config), else V(containerd)
        if O(path) (when not given, C(/etc/containerd/config.toml) or RKE2's or k3s's config) exists, V(crio) if
        C(/etc/containers/storage.conf), C(/etc/crio/crio.conf) or C(/etc/crio/crio.conf.d) exists, and the module fails
        when both or neither do.
      - V(docker) (cri-dockerd in front of Docker Engine) is read only; it is what the running runtime gives when cri-dockerd
        listens on the CRI socket.
    type: str
    choices: [containerd, crio, docker]
  path:
    description:
      - The runtime's main configuration file. When not set, the C(--config) of the running runtime (with O(query_runtime)),
        else the one its systemd unit or MicroK8s's arguments file names, else C(/etc/crio/crio.conf) for CRI-O.
      - For containerd when none of these names it, the first that exists of C(/etc/containerd/config.toml),
        C(/var/lib/rancher/rke2/agent/etc/containerd/config.toml) (RKE2), C(/var/lib/rancher/k3s/agent/etc/containerd/config.toml)
        (k3s) and C(/etc/k0s/containerd.toml) (k0s), else C(/etc/containerd/config.toml).
    type: path
  storage_path:
    description:
      - CRI-O only. The containers/storage configuration file - when not set, the C(CONTAINERS_STORAGE_CONF) of the running
        cri-o, else C(/etc/containers/storage.conf).
    type: path
  dropin_dir:
    description:
      - CRI-O only. The directory of CRI-O's configuration drop-ins - when not set, the C(--config-dir) of the running cri-o
        (or of its systemd unit), else C(/etc/crio/crio.conf.d). Every file in it
        (any name, subdirectories included) is read, in CRI-O's order; none is ever edited.
    type: path
  settings:
    description:
      - The settings to enforce, as strings (C(pinned_images) a list, C(discard_unpacked_layers) a boolean). When not given,
        the module only reads and reports.
      - Keys left out or null are not touched. Other keys fail the task, naming the keys the runtime supports.
      - "containerd: C(root) and C(state) (absolute paths; C(root) holds images and snapshots), C(snapshotter) (the CRI
        plugin's snapshotter, such as V(overlayfs), V(zfs) or V(native)) and C(sandbox_image) (the pod sandbox image:
        C(sandbox_image) of the CRI plugin in version 2, C(pinned_images.sandbox) of C(io.containerd.cri.v1.images) in
        version 3)."
      - "containerd: C(discard_unpacked_layers) (V(true) or V(false)): whether containerd's CRI pulls images so that its
        garbage collection frees their compressed layer blobs once they are unpacked (new pulls only; containerd's default
        V(false); M(kubenode.gc.storage_gc) with O(kubenode.gc.storage_gc#module:discard_unpacked_layers) frees those of
        images already pulled). Version 2: C([plugins.\"io.containerd.grpc.v1.cri\".containerd] discard_unpacked_layers);
        version 3 and 4: C([plugins.'io.containerd.cri.v1.images'] discard_unpacked_layers). containerd 2.x reads a
        version 2 file by migrating it, and its migration takes this key (and C(snapshotter)) from the CRI plugin's
        C(containerd) table only when that table has a C(runtimes) table (2.1, 2.2 and 2.3 alike: C(containerd config dump)
        shows V(false) otherwise); so in a version 2 file without one, the module also writes
        C([plugins.\"io.containerd.cri.v1.images\"] discard_unpacked_layers), which containerd 2.x reads there and 1.x
        ignores. A C(dropped_by_containerd_2) finding names any such key a version 2 file sets only where 2.x drops it."
      - "containerd 2.x (version 3 or 4 only): C(pinned_images), a list of image references that containerd pins (reports
        C(pinned) over the CRI, so the kubelet never removes them). Each is written, fully qualified, as
        C(\"kubenode-gc/<image>\" = \"<image>\") in C(pinned_images) of C(io.containerd.cri.v1.images), whose every
        value containerd pins (the image record of exactly that name) when it pulls or imports the image and when it
        starts; entries with other keys, such as C(sandbox), are left alone, and C(kubenode-gc/) entries not in the list
        are removed. V([]) removes them all. containerd does not unpin an image present when its entry is removed: its
        C(io.cri-containerd.pinned) label stays until the image or the label is removed (for example with C(ctr)).
        A non-empty list on a version 1 or 2 config fails the task."
      - "CRI-O: C(graphroot), C(runroot) and C(imagestore) (absolute paths), C(driver) (one of V(overlay), V(vfs), V(btrfs),
        V(zfs), V(devmapper) and V(aufs)) and C(pause_image) (the pod sandbox image)."
    type: dict
  content:
    description:
      - The full text of the main file (containerd's C(config.toml), CRI-O's C(crio.conf)) to start from instead of the file
        on disk, for example a template for a new node. O(settings) are applied to it, and the file is created if missing.
      - Without it, a file that must change has to exist.
    type: str
  storage_content:
    description: CRI-O only. Like O(content), for C(storage.conf).
    type: str
  backup:
    description: Keep a timestamped copy of each file before replacing it.
    type: bool
    default: false
  mode:
    description:
      - The permissions of a file the module creates, an octal string such as V('0644'). Existing files keep their owner and
        mode.
    type: raw
    default: '0644'
  validate:
    description:
      - A command to check the new containerd C(config.toml) or CRI-O C(crio.conf) before it replaces the old one; C(%s) is
        the temporary file. When it fails, nothing is written.
      - "For example V(containerd --config %s config dump)."
    type: str
  query_runtime:
    description:
      - Ask the runtime through its CRI socket (O(cri_endpoint)) for the findings that compare the configuration with the
        running runtime, and read the command line of the process listening there (see the description).
      - V(false) reads the files only, as on a node image being built.
      - When the socket cannot be reached, the module adds an C(info) finding C(runtime_unreachable) instead of failing.
        grpcio and protobuf are needed only when the socket answers.
    type: bool
    default: true
requirements:
  - tomlkit >= 0.11 (python3-tomlkit on Debian 12) on the managed node.
notes:
  - Files are replaced atomically. For CRI-O, C(crio.conf) is written before C(storage.conf).
  - Every file read (O(path), O(storage_path), drop-ins, containerd imports) must be a regular file (or a symbolic link to
    one) of at most 4 MiB; a FIFO, a device, a directory or a bigger file fails the task at once with one sentence naming
    it, before anything is read.
  - Runs that may write hold an exclusive lock (C(flock) on the directory of each file they may write, no lock file is
    created) from reading the files to replacing them, so two runs editing one file at the same moment both land, one
    after the other; a run waits up to 60 seconds for the other. Just before each replace the file's bytes are compared
    with what the run read; when another program changed them, the task fails with one sentence and that file is not written.
  - "containerd: when an import overrides a setting of O(settings) with another value, the task fails with one sentence
    naming the import and the key and writes nothing, not even the main file (editing the winning import instead would
    change a file another tool owns). An import overriding a value the main file sets is an C(import_overrides) warning.
    A missing import (containerd does not start with one; a glob matching nothing is fine) or one that is not TOML
    fails the task naming it."
  - "containerd imports are read in the main file's config version: an import written for another version is read with
    the main file's key names. containerd 1.6 resolves a relative glob against its working directory (C(/) under
    systemd), not the file's directory as 1.7 and 2.x do; use absolute globs for containerd 1.6."
  - "CRI-O: a drop-in overriding a setting of O(settings) is a C(dropin_overrides) warning, not a failure (drop-ins are
    not edited). containers/storage as CRI-O 1.37 uses it has no C(storage.conf) drop-ins."
  - Runtime findings describe the running runtime, which still uses the old values until it is restarted.
  - Secret values are never returned. Every value under a secret-bearing key - containerd's registry C(auth) tables
    (C(username), C(password), C(auth), C(identitytoken)), C(auths), C(headers)/C(header), and any key named like
    C(password), C(token), C(secret), C(auth), C(private_key) or C(client_key) - is replaced by
    V(VALUE_SPECIFIED_IN_NO_LOG_PARAMETER) in RV(diff) and removed from every message. So is the user information of a URL
    anywhere in a file (a registry mirror C(endpoint = ["https://user:password@mirror"]) is shown as
    C(https://VALUE_SPECIFIED_IN_NO_LOG_PARAMETER@mirror)). Paths such as cri-o's
    C(global_auth_file) are not secrets. All return values are therefore safe to log; the module's own arguments are not
    redacted, so give O(content) or O(storage_content) holding credentials with C(no_log) on the task.
  - When O(path) or O(storage_path) (or their defaults) is a symbolic link, or a chain of them, the file at its end is read,
    backed up and replaced, keeping its owner and mode, and the links stay as they are (RV(resolved_path),
    RV(resolved_files)). A link to nothing fails the task and nothing is created. Drop-ins are only read.
seealso:
  - module: kubenode.gc.cri_info
  - name: containerd CRI plugin configuration
    description: The CRI plugin's settings in config versions 2 and 3.
    link: https://github.com/containerd/containerd/blob/main/docs/cri/config.md
  - name: containers-storage.conf(5)
    description: The containers/storage configuration file.
    link: https://github.com/containers/storage/blob/main/docs/containers-storage.conf.5.md
"""

EXAMPLES = r"""
- name: Audit the runtime's storage configuration without changing anything
  kubenode.gc.runtime_config:
  become: true
  register: runtime_config

- name: Show the findings
  ansible.builtin.debug:
    msg: "{{ runtime_config.findings | map(attribute='message') | list }}"

- name: Move containerd's root to the data disk, checking the new file with containerd itself
  kubenode.gc.runtime_config:
    runtime: containerd
    settings:
      root: /data/containerd
    validate: containerd --config %s config dump
    backup: true
  become: true
  notify: Restart containerd

- name: Set CRI-O's storage root and pause image
  kubenode.gc.runtime_config:
    runtime: crio
    settings:
      graphroot: /data/containers/storage
      pause_image: registry.k8s.io/pause:3.10
  become: true
  notify: Restart crio

- name: Write containerd's configuration on a new node from a template, with this node's snapshotter
  kubenode.gc.runtime_config:
    runtime: containerd
    content: "{{ lookup('ansible.builtin.template', 'containerd-config.toml.j2') }}"
    settings:
      snapshotter: "{{ containerd_snapshotter | default('overlayfs') }}"
    mode: '0644'
  become: true
"""

RETURN = r"""
runtime:
  description: The runtime whose configuration was read, V(containerd) or V(crio).
  returned: always
  type: str
  sample: containerd
files:
  description: The files written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
  sample: ["/etc/containerd/config.toml"]
backup_files:
  description: The backup made of each file written, when O(backup) is set.
  returned: always
  type: dict
  sample: {"/etc/containerd/config.toml": "/etc/containerd/config.toml.12345.2026-01-01@10:00:00~"}
resolved_path:
  description: The main configuration file (O(path) or its default) with every symbolic link followed.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
resolved_files:
  description: For each file of RV(files), the file actually written (in check mode, that would be), links followed.
  returned: always
  type: dict
  sample: {"/etc/containerd/config.toml": "/etc/containerd/config-generated.toml"}
diff:
  description:
    - One diff per file that changes, with C(before), C(after), C(before_header) and C(after_header).
    - Redacted - every scalar under a key whose name (case-insensitively, without C(_) and C(-)) is C(auth), C(auths),
      C(authorization), C(header), C(headers), C(identitytoken), C(registrytoken), C(password), C(passwd), C(token),
      C(bearertoken), C(secret), C(privatekey), C(clientkey), C(apikey) or C(credentials), or ends with C(password),
      C(passwd), C(token), C(secret), C(privatekey), C(clientkey), C(apikey), C(secretkey), C(auth) or C(auths), is
      V(VALUE_SPECIFIED_IN_NO_LOG_PARAMETER); a text that cannot be parsed is shown as that marker alone. When a secret
      value itself changes, both sides show the marker and C(after_header) is the
      path followed by the dotted keys of the changed secret values, in parentheses.
  returned: in diff mode
  type: list
  elements: dict
current:
  description:
    - The effective value of every setting of the runtime after the run (in check mode, as it would be), with the
      runtime's default where no file sets it (V(null) where the default depends on the runtime's version).
    - containerd's C(discard_unpacked_layers) is a boolean (containerd's default V(false)).
    - containerd also has C(config_version), V(1), V(2), V(3), V(4) or V(null) for a missing or empty file (that of the
      main file), and in versions 3 and 4 C(pinned_images), the sorted images of the C(kubenode-gc/) entries of
      C(pinned_images). For k3s and RKE2, C(root) and C(state) are those of their containerd command line.
      containerd's values are those of the main file merged with its C(imports).
    - For CRI-O, C(storage.conf) values are overridden by C([crio]) keys of C(crio.conf) and then by the drop-ins.
    - For Docker Engine, C(data_root), C(data_root_source) (V(command_line), V(config_file) or V(default)), C(config_file)
      (the C(daemon.json) read), C(config_file_exists) and C(docker_endpoint) (the engine's socket).
  returned: always
  type: dict
  sample: {"config_version": 2, "root": "/var/lib/containerd", "state": "/run/containerd", "snapshotter": "overlayfs",
           "sandbox_image": "registry.k8s.io/pause:3.10", "discard_unpacked_layers": false}
changes:
  description:
    - The settings whose effective value this run changes (in check mode, would change), with the value before and
      after. With O(settings) in check mode this is the drift between the node and the desired settings.
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: The setting, one of the O(settings) keys.
      type: str
    before:
      description: Its effective value before the run.
      type: raw
    after:
      description: Its effective value after the run.
      type: raw
  sample: [{"key": "root", "before": "/var/lib/containerd", "after": "/srv/containerd"}]
findings:
  description:
    - What looks wrong, most severe first, then by code. Codes are C(root_not_on_imagefs), C(sandbox_image_mismatch),
      C(config_version_1), C(crio_root_mismatch), C(crio_runroot_mismatch), C(crio_imagestore_mismatch),
      C(crio_storage_driver_mismatch), C(dropin_overrides), C(import_overrides) (a containerd import overrides a value of
      the main file), C(generated_file) (a file read is generated, see the description), C(config_version_4),
      C(dropped_by_containerd_2) (a version 2 file sets C(snapshotter) or C(discard_unpacked_layers) where containerd 2.x
      drops it, see O(settings); V(info), V(warning) when the running containerd is 2.x),
      C(root_from_command_line) and C(state_from_command_line) (containerd's C(--root)/C(--state) - of the running runtime, its
      unit, MicroK8s, k3s, RKE2 or k0s), C(graphroot_from_command_line), C(runroot_from_command_line),
      C(imagestore_from_command_line), C(driver_from_command_line) and C(pause_image_from_command_line) (cri-o's flags),
      C(daemon_differs_from_files) (the running runtime names another value - containerd's CRI status its root or state, and
      on 1.x its C(discard_unpacked_layers),
      cri-o's configuration its graphroot, runroot, driver or imagestore), C(daemon_reads_other_file)
      (O(path), O(storage_path) or O(dropin_dir) is not what the runtime reads), C(template_placeholder) (a C(${VAR}) value
      of a template), C(data_root_not_imagefs) (Docker Engine - dockerd's configured data root is not the image filesystem
      cri-dockerd reports), C(runtime_unreachable) and C(runtime_other) (the socket belongs to another runtime, so the runtime
      checks were skipped), C(untrusted_daemon_process) (the process listening on the socket is not root's, or runs from an
      executable another user owns or may write; ignored, named by pid, uid and executable) and C(untrusted_path) (a file
      was read through a directory or link another user owns or may write; an edit of it is refused).
  returned: always
  type: list
  elements: dict
  contains:
    severity:
      description: V(warning) or V(info).
      type: str
    code:
      description: A stable identifier of the finding.
      type: str
    message:
      description: One sentence naming the files, values and runtime involved.
      type: str
  sample: [{"severity": "warning", "code": "sandbox_image_mismatch",
            "message": "The config sets sandbox_image registry.k8s.io/pause:3.10 but the runtime at unix:///run/containerd/containerd.sock uses
                        registry.k8s.io/pause:3.9 (a restart applies the new value)."}]
daemon:
  description:
    - The running runtime whose command line the module used (with O(query_runtime)) - its C(pid) and the C(flags) read from
      its command line and environment (C(config), C(config-dir), C(root), C(state), C(runroot), C(pause-image),
      C(storage-driver), C(imagestore), C(address), C(storage-conf); for Docker Engine the running dockerd's C(data-root),
      C(config-file) and C(exec-root)); V(null) when none was read.
  returned: always
  type: dict
  sample: {"pid": 812, "flags": {"config": "/etc/containerd/config.toml", "root": "/data/containerd"}}
  version_added: 0.1.0
rpc_calls:
  description: CRI calls made, per method (none when O(query_runtime) is false or the runtime is unreachable).
  returned: always
  type: dict
  sample: {"Version": 1, "Status": 1, "ImageFsInfo": 1}
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import execute
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import config_files
from ansible_collections.kubenode.gc.plugins.module_utils.config._runtime_config import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, config_files)


if __name__ == "__main__":
    main()
