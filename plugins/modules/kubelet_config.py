#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_config
short_description: Audit and set the kubelet's garbage collection, eviction and log rotation settings in its configuration file
version_added: 0.1.0
description:
  - Reads the kubelet's C(KubeletConfiguration) file (YAML or JSON) and the flag files that feed the kubelet's command line,
    and reports the values the kubelet will use (RV(effective)), the flags that override the file (RV(flag_overrides)) and
    known pitfalls (RV(findings)).
  - With O(settings), sets the image garbage collection, eviction and container log keys in the file, and nothing else. The
    file keeps its format. YAML is edited round-trip, so comments, key order, quoting, indentation and every other key stay as
    they were; JSON keeps its key order, indentation and trailing newline. New keys go in sorted position when the keys of
    the mapping are already sorted (as kubeadm writes them), else at its end.
  - >-
    Every byte outside the edited keys is kept. Only the lines of the keys that change are written anew; every other line
    stays as written (C(True) stays C(True), C(containerRuntimeEndpoint :) keeps its space, comments and indentation
    stay), and so do the file's line endings (a CRLF file stays CRLF) and a UTF-8 byte order mark. After rendering, the
    module compares every other line with the original; if the edit would change any of them, the task fails with one
    sentence naming the line and writes nothing. A file mixing CRLF and LF line endings is read but not rewritten.
  - >-
    A key whose value is shared with another key through a YAML anchor and alias (C(evictionHard: &ev ...) and
    C(evictionSoft: *ev)) is never changed - the edit would change the other key too. The task fails with one sentence
    naming both keys and writes nothing; write the value out in full under each key first. Keys not shared are edited as usual.
  - A value that is semantically equal to the file's is not rewritten (V(2m) equals V(2m0s), V(100Mi) equals V(104857600),
    V(20%) equals V(20.0%), the string V("85") equals V(85)), so a second run reports no change.
  - >-
    Before anything is written, the resulting configuration goes through the kubelet's own checks, with the kubelet's
    messages - the C(ValidateKubeletConfiguration) rules for these keys (prefixed C(invalid configuration: )), the eviction
    threshold parser (signals, percentages, quantities, grace periods, minimum reclaims) and the container log size. When any
    check fails the task fails with one sentence listing every error, separated by C(; ), and the file is not touched.
  - The checks run on what the kubelet will use, in the kubelet's own order (C(cmd/kubelet/app/server.go)) - the file with
    the kubelet's defaults, then the drop-ins of its C(--config-dir) directory, then the flags found in O(flag_files), which
    win over both. A flag that makes the result invalid therefore blocks the write too, and the message names the flag files.
  - >-
    Drop-in directory (C(--config-dir), KEP-3983), read as the kubelet reads it - every file whose extension is C(.conf),
    subdirectories included, in lexical order (Go's C(filepath.WalkDir)); other names are not read. Each must name C(kind)
    and C(apiVersion), or the kubelet does not start and neither does this module. The drop-ins are merged onto each other
    with a JSON merge patch and then laid over the file - a value replaces the file's, a map (C(evictionHard) and the other
    eviction maps) adds its entries to the file's map (so a drop-in setting C(imagefs.available) keeps the file's or the
    default C(memory.available)), and a V(null) in a drop-in does not remove the file's value. Values of drop-ins are not
    defaulted again (a C(0s) there stays zero).
  - A requested key that a later drop-in overrides (its value, or for a map any entry) fails the task naming the drop-in, and
    nothing is written; in read-only mode each key of the file that a drop-in overrides is a C(dropin_overrides_file) finding.
    O(path) may name a drop-in (an existing one, or a new one to create with O(content)); then the file and the earlier
    drop-ins come before it and only the later ones can override it.
  - The drop-ins k3s and RKE2 rewrite at every start (C(00-k3s-defaults.conf), C(00-rke2-defaults.conf), C(10-cli-config.conf),
    C(20-cli-config-dir/)) are never edited - the task fails and names a drop-in of your own as the place for the settings.
  - >-
    Differences from the kubelet, on purpose or by necessity.
    All errors are reported, where the kubelet's eviction parser stops at the first one (in random map order).
    Raw parse errors (a quantity, percentage or duration that does not parse) are prefixed with the map and signal, for
    example C(evictionHard[memory.available]: ), because the kubelet's bare message does not say where the value is.
    Durations that do not parse are reported as C(<key>: time: invalid duration ...); values of the wrong type with Go's
    C(json: cannot unmarshal ...) message.
    The C(containerLogMaxFiles) message is C(invalid configuration: containerLogMaxFiles (--container-log-max-files) <v> must
    be greater than 1) (newer kubelets drop the flag and value from it).
    C(imageMaximumGCAge) is treated as generally available (v1.35); on v1.29-v1.34 it also needs the C(ImageMaximumGCAge)
    feature gate, which is on by default from v1.30, and feature gates are not checked.
    A negative C(imageMinimumGCAge) is rejected, as by the newest kubelets.
    The C(containerfs.available) and C(containerfs.inodesFree) eviction signals (v1.29+) are accepted.
    Only Linux eviction defaults are known (with C(imagefs.inodesFree), v1.30+).
    C(mergeDefaultEvictionSettings) is taken into account as v1.33+ kubelets do; older kubelets ignore the key.
    When a flag appears several times, the last one wins, and a repeated map flag adds to the first. A map flag such as
    C(--eviction-hard) replaces the whole map from the file and the drop-ins, and the default eviction thresholds are not
    merged into it.
  - >-
    The running kubelet is asked first. When a process named C(kubelet) runs on the node (or MicroK8s's C(kubelite), whose
    kubelet flags are in the file of its C(--kubelet-args-file)), its command line (C(/proc/<pid>/cmdline), where systemd
    has already expanded the unit's C(Environment=) and C(EnvironmentFile=) variables) is the truth - its C(--config) is
    the file (relative paths are taken from the kubelet's working directory), its C(--config-dir) the drop-in directory,
    its C(--root-dir) RV(root_dir), and its flags the ones in RV(flag_overrides) (named by the flag file that sets the same
    value, else by C(/proc/<pid>/cmdline)). The flag files are then only compared with it - each flag (C(--config)
    included) on which they disagree is a C(daemon_differs_from_files) warning naming both values. The module must run as
    root (C(become)) to read another user's process.
  - >-
    Only root's kubelet is believed: a process whose real and effective uid are 0 and whose executable
    (C(/proc/<pid>/exe)) is a regular file owned by root that neither group nor others may write. Where systemd runs, the
    kubelet the kubelet's unit runs (C(kubelet.service), MicroK8s's C(snap.microk8s.daemon-kubelite), k0s's
    C(k0sworker), k3s's C(k3s)/C(k3s-agent), RKE2's C(rke2-server)/C(rke2-agent); its cgroup is C(/system.slice/<unit>))
    wins over any other process of that name. Any user can start a process named C(kubelet); one that fails these checks is
    ignored, named (pid, uid, executable) in an C(untrusted_daemon_process) warning, and with no kubelet of root's the flag
    files decide, as when none runs.
  - >-
    A path is written only when nothing on the way belongs to another user - every directory and link from C(/) to the
    file owned by root, no directory writable by group or others (a sticky one such as C(/tmp) excepted, where the file
    itself must be root's) - as systemd's C(chase()) with C(CHASE_SAFE) resolves it, each step relative to the directory
    opened before, the file renamed into that very directory. An edit of any other path is refused with one sentence
    naming the directory or link and its owner, and nothing is written. Such a file is still read (the kubelet reads it
    too), with an C(untrusted_path) warning.
  - >-
    Edits that cannot take effect are refused with one sentence and nothing is written - an O(path) that is not the file
    the running kubelet reads (its C(--config), or a drop-in of its C(--config-dir)); a O(settings) key that a flag on the
    running kubelet's command line sets; and a file that something else writes again - GKE's C(configure.sh) writes
    C(/home/kubernetes/kubelet-config.yaml) at every boot, k0s writes its C(kubelet-config.yaml) at every start from its
    worker profile, Bottlerocket renders every file from its settings API (change it with C(apiclient set)), and a file under
    C(/run) is on a tmpfs. A read of such a file is a C(generated_file) warning.
  - >-
    When no kubelet runs (a node image being built), the flag files are the kubelet's command line - every flag found in
    O(flag_files) is assumed to reach the kubelet, and where no flag file names the configuration file, the module says so
    (C(config_path_assumed), C(no_config_file)) instead of presenting a guess as fact. A flag value that still holds a
    C($VAR) or C(${VAR}) placeholder nothing defines (a template's) is no value and is left out. MicroK8s's
    C(args/kubelet) (one flag per line) has its snap's variables (C($SNAP_DATA), C($SNAP_COMMON)) expanded as MicroK8s
    does. k0s runs its kubelet with C(--root-dir /var/lib/k0s/kubelet).
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target.
    support: full
    details:
      - Everything is computed and validated, C(changed) and the diff are reported, and nothing is written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details:
      - The file's text before and after, with secret values redacted (see RV(diff)).
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  path:
    description:
      - The kubelet configuration file.
      - It may also be a drop-in of the kubelet's drop-in directory (see O(config_dir)).
      - When not given, the C(--config) of the running kubelet (none when it has none). When no kubelet runs, the path in
        the last C(--config) flag found in O(flag_files) (whether it exists or not, as that is the file the kubelet reads),
        else the first existing file of V(/var/lib/kubelet/config.yaml) (kubeadm),
        V(/etc/kubernetes/kubelet/kubelet-config.json) (EKS AL2), V(/etc/kubernetes/kubelet-config.yaml) (kubespray),
        V(/var/lib/k0s/kubelet-config.yaml) and V(/run/k0s/kubelet-config.yaml) (k0s), with a C(config_path_assumed) finding.
      - A path the running kubelet does not read is reported with a C(daemon_reads_other_file) warning, and O(settings) or
        O(content) for it fail the task.
      - When there is none of these, a node whose flags or drop-in directory are found (AKS's flags-only kubelet, RKE2 and k3s,
        which run the kubelet with C(--config-dir) only) is reported from its defaults, drop-ins and flags (RV(path) is
        V(null), a C(no_config_file) finding); O(settings) and O(content) then need O(path). When nothing at all is found
        the task fails.
      - It must be a regular file (or a symbolic link to one) of at most 4 MiB; a FIFO, a device, a directory or a bigger
        file fails the task at once with one sentence naming it, before anything is read. Flag files that are not regular
        files are skipped; a bigger one fails the task the same way.
    type: path
  settings:
    description:
      - KubeletConfiguration keys to set, with their camelCase names. Supported keys are C(imageGCHighThresholdPercent),
        C(imageGCLowThresholdPercent) (integers; a string of digits is accepted and written as an integer),
        C(imageMinimumGCAge), C(imageMaximumGCAge), C(evictionPressureTransitionPeriod), C(containerLogMonitorInterval) (Go
        duration strings such as V(2m) or V(168h)), C(evictionHard), C(evictionSoft), C(evictionSoftGracePeriod),
        C(evictionMinimumReclaim) (mappings of eviction signal to a string value), C(evictionMaxPodGracePeriod),
        C(containerLogMaxFiles), C(containerLogMaxWorkers) (integers), C(mergeDefaultEvictionSettings) (boolean),
        C(containerLogMaxSize) (a quantity such as V(10Mi)) and C(podLogsDir) (an absolute path). Any other key fails the task.
      - A mapping value sets the map exactly - signals not given are removed from it, entries that stay keep their order
        and comments.
      - A value of V(null) removes the key from the file, so the kubelet's default applies.
      - When neither O(settings) nor O(content) is given the module only reads and reports, never writes, and returns
        C(changed=false).
    type: dict
  content:
    description:
      - The full text to start from instead of the existing file, for example from a template lookup on a node being built.
        The file may then be missing, and is created with O(mode). O(settings) are applied on top of it.
      - The file is written in JSON when O(path) ends with C(.json), else in YAML, converting the content if needed.
      - The file is replaced when the result differs from its text. Giving O(content) without O(settings) writes the
        content as it is.
    type: str
  backup:
    description: Keep a timestamped copy of the old file next to it when it is replaced.
    type: bool
    default: false
  mode:
    description:
      - The permissions of a file this module creates, as an octal string such as V('0644') or a number. An existing file
        keeps its owner, group and mode.
    type: raw
    default: '0644'
  validate:
    description:
      - A command run on the new text before the file is replaced, with C(%s) standing for a temporary file in the same
        directory, for example a schema checker such as V(/usr/local/bin/check-kubelet-config %s). A non-zero exit fails the task
        and leaves the file alone.
    type: str
  config_dir:
    description:
      - The kubelet's drop-in directory (its C(--config-dir)).
      - When not given, the running kubelet's C(--config-dir) (none when it has none); when no kubelet runs, the last
        C(--config-dir) flag found in O(flag_files) (EKS AL2023's nodeadm passes
        V(/etc/kubernetes/kubelet/config.json.d)), else the directory RKE2 or k3s passes, when it exists -
        V(/var/lib/rancher/rke2/agent/etc/kubelet.conf.d), V(/var/lib/rancher/k3s/agent/etc/kubelet.conf.d) (with a
        C(config_dir_of_distribution) finding). No directory is read when there is none.
    type: path
    version_added: 0.1.0
  flag_files:
    description:
      - Files (glob patterns allowed) that hold kubelet flags - environment files with lines such as
        C(KUBELET_KUBEADM_ARGS="--a=b --c d") (kubeadm's C(kubeadm-flags.env), kubespray's C(kubelet.env) with its
        C(KUBELET_ARGS) and C(kubelet_custom_flags), EKS nodeadm's C(NODEADM_KUBELET_ARGS), AKS's C(KUBELET_FLAGS),
        kOps's C(DAEMON_ARGS) in C(/etc/sysconfig/kubelet)) and
        systemd units or drop-ins with C(Environment=) and C(ExecStart=) lines (backslash continuations are joined; a k3s or
        RKE2 C(--kubelet-arg=name=value) there is the kubelet flag C(--name=value)), and arguments files with one flag per
        line (MicroK8s's C(args/kubelet)). Files that do not exist are skipped.
      - When a kubelet runs, its command line is used instead and these files are only compared with it (see the
        description).
      - Files ending in C(.yaml) or C(.yml) are k3s/RKE2 configuration files - their C(kubelet-arg) list (a later file's
        list replaces an earlier one, C(kubelet-arg+) appends to it) gives kubelet flags. k3s and RKE2 do not pass
        C(config=) and C(config-dir=) on - they copy them into their drop-in directory, which is read instead.
      - These flags are reported in RV(flag_overrides) and override the file in RV(effective) - C(--image-gc-high-threshold),
        C(--image-gc-low-threshold), C(--minimum-image-ttl-duration), C(--eviction-hard), C(--eviction-soft),
        C(--eviction-soft-grace-period), C(--eviction-minimum-reclaim), C(--eviction-pressure-transition-period),
        C(--eviction-max-pod-grace-period), C(--container-log-max-size) and C(--container-log-max-files); the deprecated
        container garbage collection flags C(--minimum-container-ttl-duration), C(--maximum-dead-containers-per-container)
        and C(--maximum-dead-containers) are reported too. Other flags are ignored.
    type: list
    elements: path
    default:
      - /var/lib/kubelet/kubeadm-flags.env
      - /etc/default/kubelet
      - /etc/sysconfig/kubelet
      - /etc/systemd/system/kubelet.service.d/*.conf
      - /usr/lib/systemd/system/kubelet.service.d/*.conf
      - /lib/systemd/system/kubelet.service.d/*.conf
      - /etc/kubernetes/kubelet.env
      - /etc/eks/kubelet/environment
      - /etc/systemd/system/kubelet.service
      - /usr/lib/systemd/system/kubelet.service
      - /var/snap/microk8s/current/args/kubelet
      - /etc/rancher/k3s/config.yaml
      - /etc/rancher/k3s/config.yaml.d/*.yaml
      - /etc/rancher/rke2/config.yaml
      - /etc/rancher/rke2/config.yaml.d/*.yaml
notes:
  - The kubelet reads its configuration only when it starts; restart it (for example with a handler) after a change.
  - Runs that may write hold an exclusive lock (C(flock) on the file's directory, no lock file is created) from reading
    the file to replacing it, so two runs editing one file at the same moment both land, one after the other; a run
    waits up to 60 seconds for the other. Just before the replace the file's bytes are compared with what the run read;
    when another program changed them, the task fails with one sentence and writes nothing.
  - Secret values are never returned. Every value under a secret-bearing key - C(staticPodURLHeader) (all header values)
    and any key named like C(password), C(token), C(secret), C(auth), C(private_key) or C(client_key) (see RV(config)) - is
    replaced by V(VALUE_SPECIFIED_IN_NO_LOG_PARAMETER) in RV(config), RV(effective) and the diff, and removed from every
    message. So is the user information of a URL anywhere in the file (C(https://user:password@host) is shown as
    C(https://VALUE_SPECIFIED_IN_NO_LOG_PARAMETER@host)). All return values are therefore safe to log; the module's own arguments are not redacted, so give
    O(content) holding credentials with C(no_log) on the task.
  - When O(path) (or the file found) is a symbolic link, or a chain of them, the file at its end is read, backed up and
    replaced, keeping its owner and mode, and the links stay as they are (RV(resolved_path)). A link to nothing fails the
    task and nothing is created.
  - The RV(findings) check C(gc_high_at_or_above_eviction) compares the image GC high threshold only with percentage
    C(imagefs.available) thresholds; a quantity threshold such as V(10Gi) cannot be compared without the disk size.
requirements:
  - ruamel.yaml (0.17 or later) on the managed node
seealso:
  - module: kubenode.gc.image_gc
  - module: kubenode.gc.container_gc
"""

EXAMPLES = r"""
- name: Audit the kubelet's GC and eviction settings without changing anything
  kubenode.gc.kubelet_config:
  become: true
  register: kubelet

- name: Show problems found on the node
  ansible.builtin.debug:
    msg: "{{ kubelet.findings | selectattr('severity', 'in', ['error', 'warning']) | map(attribute='message') | list }}"

- name: Start image GC well before disk-pressure eviction and keep the default eviction thresholds
  kubenode.gc.kubelet_config:
    settings:
      imageGCHighThresholdPercent: 75
      imageGCLowThresholdPercent: 60
      imageMinimumGCAge: 5m
      imageMaximumGCAge: 168h
      evictionHard:
        memory.available: 100Mi
        nodefs.available: 10%
        nodefs.inodesFree: 5%
        imagefs.available: 15%
        imagefs.inodesFree: 5%
      containerLogMaxSize: 50Mi
      containerLogMaxFiles: 3
    backup: true
  become: true
  notify: Restart kubelet

- name: Remove a soft eviction policy so the kubelet's defaults apply again
  kubenode.gc.kubelet_config:
    path: /var/lib/kubelet/config.yaml
    settings:
      evictionSoft: null
      evictionSoftGracePeriod: null
  become: true
  notify: Restart kubelet

- name: Write the kubelet configuration of a new node from a template, with this node's thresholds
  kubenode.gc.kubelet_config:
    path: /var/lib/kubelet/config.yaml
    content: "{{ lookup('ansible.builtin.template', 'kubelet-config.yaml.j2') }}"
    settings:
      imageGCHighThresholdPercent: "{{ node_image_gc_high | default(80) }}"
      imageGCLowThresholdPercent: "{{ node_image_gc_low | default(70) }}"
    mode: '0600'
  become: true
"""

RETURN = r"""
path:
  description:
    - The configuration file read (and written), as given or found; it may be a symbolic link.
    - V(null) when the kubelet runs without one (flags and drop-ins only).
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config_dir:
  description: The kubelet's drop-in directory read (see O(config_dir)), V(null) when none.
  returned: always
  type: str
  sample: /etc/kubernetes/kubelet/config.json.d
  version_added: 0.1.0
dropins:
  description: The drop-ins of RV(config_dir), in the order the kubelet merges them.
  returned: always
  type: list
  elements: str
  sample: ["/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf"]
  version_added: 0.1.0
sources:
  description:
    - For every key of RV(effective), where the kubelet takes it from - V(default), the configuration file's path, the
      path of the last drop-in that sets it, or the flag file of the last flag that sets it.
  returned: always
  type: dict
  sample: {"imageGCHighThresholdPercent": "/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf", "imageMaximumGCAge": "default"}
  version_added: 0.1.0
feature_gates:
  description:
    - The feature gates the node sets for the kubelet - C(featureGates) of the configuration file, then every
      C(--feature-gates) flag in O(flag_files) (a flag wins per gate, as in the kubelet). Values that are not booleans are
      left out.
    - A gate that is not in it has the default of the kubelet's version (for example C(KubeletEnsureSecretPulledImages),
      beta and on by default since Kubernetes 1.35).
  returned: always
  type: dict
  sample: {"KubeletEnsureSecretPulledImages": true}
  version_added: 0.1.0
root_dir:
  description:
    - The kubelet's root directory - the running kubelet's C(--root-dir), else the last C(--root-dir) flag in O(flag_files),
      else V(/var/lib/k0s/kubelet) for k0s's configuration file and V(/var/lib/kubelet) for any other. Its
      C(image_manager/) subdirectory holds the kubelet's pulled-image credential records, which no module of this
      collection ever touches.
  returned: always
  type: str
  sample: /var/lib/kubelet
  version_added: 0.1.0
daemon:
  description:
    - The running kubelet whose command line the module used - its C(pid) and C(source), C(/proc/<pid>/cmdline) or the
      arguments file of MicroK8s's C(kubelite); V(null) when no kubelet runs and the flag files were used.
  returned: always
  type: dict
  sample: {"pid": 1234, "source": "/proc/1234/cmdline"}
  version_added: 0.1.0
resolved_path:
  description: The file actually read and written, RV(path) with every symbolic link followed.
  returned: always
  type: str
  sample: /etc/kubernetes/kubelet/config-1.31.yaml
format:
  description: The file's format, V(yaml) or V(json); V(null) without a file.
  returned: always
  type: str
  sample: yaml
created:
  description: Whether the file did not exist and was created (in check mode, would be).
  returned: always
  type: bool
  sample: false
backup_file:
  description: The backup copy of the old file.
  returned: when O(backup=true) and the file was replaced
  type: str
  sample: /var/lib/kubelet/config.yaml.12345.2026-01-01@10:00:00~
config:
  description:
    - The file's resulting top-level mapping (in check mode, what it would be), as plain data.
    - Redacted - every scalar under C(staticPodURLHeader), and under any key whose name (case-insensitively, without C(_)
      and C(-)) is C(auth), C(auths), C(header), C(headers), C(identitytoken), C(registrytoken), C(password), C(passwd),
      C(token), C(bearertoken), C(secret), C(privatekey), C(clientkey), C(apikey), C(credentials) or C(authorization)
      (but not the top-level C(authorization) settings), or ends with C(password), C(passwd), C(token), C(secret),
      C(privatekey), C(clientkey), C(apikey), C(secretkey), C(auth) or C(auths), is V(VALUE_SPECIFIED_IN_NO_LOG_PARAMETER).
      Header names and file paths (C(tlsPrivateKeyFile)) stay.
  returned: always
  type: dict
  sample: {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "imageGCHighThresholdPercent": 75}
effective:
  description:
    - For every supported key, the value the kubelet will use - its default (C(imageMinimumGCAge) V(2m), also when the
      file says V(0s); C(imageMaximumGCAge) V(0s); thresholds 85 and 80; C(evictionPressureTransitionPeriod) V(5m);
      C(containerLogMaxSize) V(10Mi); C(containerLogMaxFiles) 5; C(containerLogMaxWorkers) 1;
      C(containerLogMonitorInterval) V(10s); C(mergeDefaultEvictionSettings) false; C(podLogsDir) V(/var/log/pods)),
      overridden by the file, then by the drop-ins, then by the flags.
    - C(evictionHard) is the Linux default set (C(memory.available<100Mi), C(nodefs.available<10%), C(nodefs.inodesFree<5%),
      C(imagefs.available<15%), C(imagefs.inodesFree<5%)) when the file has none, the file's map plus the missing defaults
      with C(mergeDefaultEvictionSettings), else only the file's (or a flag's) map.
    - Durations are Go duration strings (V(2m0s), V(168h0m0s)), so they compare as strings. A file value that cannot be
      decoded is reported as its default, with an C(invalid_config) finding.
  returned: always
  type: dict
  sample: {"imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80, "imageMinimumGCAge": "2m0s", "imageMaximumGCAge": "0s",
           "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
                            "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
           "evictionSoft": {}, "evictionSoftGracePeriod": {}, "evictionMinimumReclaim": {}, "evictionPressureTransitionPeriod": "5m0s",
           "evictionMaxPodGracePeriod": 0, "mergeDefaultEvictionSettings": false, "containerLogMaxSize": "10Mi",
           "containerLogMaxFiles": 5, "containerLogMaxWorkers": 1, "containerLogMonitorInterval": "10s", "podLogsDir": "/var/log/pods"}
flag_overrides:
  description: The flags found in O(flag_files) that override a supported key or are deprecated container GC flags, in order.
  returned: always
  type: list
  elements: dict
  contains:
    flag:
      description: The flag, with its dashes.
      type: str
      sample: --image-gc-high-threshold
    value:
      description: The flag's value as written.
      type: str
      sample: "90"
    file:
      description: The file the flag is in.
      type: str
      sample: /var/lib/kubelet/kubeadm-flags.env
    key:
      description: The KubeletConfiguration key it overrides, V(null) for the deprecated container GC flags.
      type: str
      sample: imageGCHighThresholdPercent
    deprecated:
      description: Whether it is one of the deprecated container GC flags that have no config file key.
      type: bool
      sample: false
changes:
  description:
    - The O(settings) keys whose value, as the kubelet reads the file (its defaults for absent keys, flags aside), this
      run changes (in check mode, would change), before and after, in the form of RV(effective). Writing a key the file
      lacks with the kubelet's default value, or V(2m) over V(2m0s), is no change here.
    - With O(settings) in check mode this is the drift between the node and the desired settings.
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: The KubeletConfiguration key.
      type: str
    before:
      description: Its value before the run.
      type: raw
    after:
      description: Its value after the run.
      type: raw
  sample: [{"key": "imageGCHighThresholdPercent", "before": 95, "after": 80}]
findings:
  description:
    - Problems and facts about the effective configuration, errors first, then warnings, then information, each sorted by
      code.
    - C(invalid_config) (error, read-only mode) - one per error the kubelet would report for the current configuration.
    - C(invalid_flag) (error) - a flag whose value does not parse; it is left out of RV(effective).
    - C(max_age_not_above_min) (error) - C(imageMaximumGCAge) is set but not above the effective C(imageMinimumGCAge).
    - C(gc_high_at_or_above_eviction) (warning) - the image GC high threshold is at or above the disk usage where a hard
      (or, separately, soft) C(imagefs.available) percentage threshold evicts pods, so eviction can come first. Not reported
      when image GC is disabled (high threshold 100).
    - C(partial_eviction_hard) (warning) - C(evictionHard) from the file without C(mergeDefaultEvictionSettings), or from a
      flag, drops default signals, which are then not monitored; the message lists them.
    - C(flag_overrides_file) (warning) - one per flag that overrides a key, saying whether the file sets that key.
    - C(dropin_overrides_file) (warning) - a key the file sets that a later drop-in overrides (for a map, adds entries to),
      naming the drop-ins and the value the kubelet uses.
    - C(no_config_file) (info) - the kubelet runs without a configuration file; the values are its defaults, drop-ins and
      flags.
    - C(config_path_assumed) (info) - no flag file names the kubelet's C(--config), so a file at a default path is assumed
      to be the one it reads.
    - C(config_dir_of_distribution) (info) - the drop-in directory is the one RKE2 or k3s pass to the kubelet.
    - C(daemon_differs_from_files) (warning) - the running kubelet's command line and the flag files disagree on a flag,
      naming both values.
    - C(daemon_reads_other_file) (warning) - O(path) is not the file the running kubelet reads.
    - C(untrusted_daemon_process) (warning) - a process named C(kubelet) (or C(kubelite)) that is not root's, or runs from
      an executable another user owns or may write, was ignored; the message names its pid, uid and executable.
    - C(untrusted_path) (warning) - a file was read through a directory or symbolic link another user owns (or a
      directory group or others may write); an edit of it is refused.
    - C(generated_file) (warning) - something else writes the file again (GKE, k0s, Bottlerocket, C(/run)); an edit of it
      is refused.
    - C(deprecated_flag) (warning) - one per deprecated container GC flag.
    - C(image_gc_disabled) (info) - C(imageGCHighThresholdPercent) is 100.
  returned: always
  type: list
  elements: dict
  contains:
    severity:
      description: V(error), V(warning) or V(info).
      type: str
      sample: warning
    code:
      description: A stable identifier of the check.
      type: str
      sample: partial_eviction_hard
    message:
      description: One sentence.
      type: str
      sample: "evictionHard in the config file without mergeDefaultEvictionSettings replaces the kubelet's default hard eviction
        thresholds, so nodefs.inodesFree<5%, imagefs.inodesFree<5% are not monitored; list them too or set
        mergeDefaultEvictionSettings: true (kubelet v1.33+)"
diff:
  description:
    - The file's text before and after, with every secret value (see RV(config)) replaced by
      V(VALUE_SPECIFIED_IN_NO_LOG_PARAMETER). A text that cannot be parsed is shown as that marker alone.
    - When a secret value itself changes, both sides show the marker and C(after_header) is the
      path followed by the dotted keys of the changed secret values, in parentheses.
  returned: when diff mode is on
  type: dict
  sample: {"before": "imageGCHighThresholdPercent: 85\n", "after": "imageGCHighThresholdPercent: 75\n"}
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import execute
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import config_files
from ansible_collections.kubenode.gc.plugins.module_utils.config._kubelet_config import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, config_files)


if __name__ == "__main__":
    main()
