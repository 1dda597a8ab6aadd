#!/usr/bin/env bash
# Demo on a Debian 12 machine, as root: start a real containerd on a small tmpfs,
# fill it with sample images and pods, and run ansible-playbook against it, with
# this machine as the node: demo/cri_info.yml, then one full cycle of the fleet
# playbooks - kubenode.gc.audit finds the node over its image GC high threshold
# with reclaimable images, kubenode.gc.cleanup --check shows the plan, the real
# cleanup frees the node down to its low threshold, and a second audit shows the
# change in the report (./kubenode-gc-report, with its history directory); it ends with
# the names of the images the cleanup removed, from the cleanup's history record, which is
# kept in ./kubenode-gc-history (KUBENODE_GC_DEMO_HISTORY_DIR), outside the work directory.
# The set-up installs and fetches only what the chosen runtime needs.
# KUBENODE_GC_DEMO_RUNTIME picks the runtime: containerd-1.6 (Debian 12's, the
# default), containerd-1.7 (Debian trixie's), containerd-2.1 (Debian sid's), crio
# (cri-o 1.37 from ../shared/runtimes or $KUBENODE_GC_CRIO_DIR) or docker (Debian 12's
# docker.io behind cri-dockerd 0.4.3 from ../shared/runtimes; it installs docker.io).
# KUBENODE_GC_DEMO_KEEP=1 leaves the runtime running afterwards (stop it with
# "python -m devtools.cli down --workdir <dir>").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNTIME=${KUBENODE_GC_DEMO_RUNTIME:-containerd-1.6}
# docker is the harness's cri-dockerd (Docker Engine behind cri-dockerd)
[ "$RUNTIME" = docker ] && RUNTIME=cri-dockerd
# only what this runtime needs: no containerd 1.7 or 2.x for the default demo, no Docker (but for docker) or Chromium
KUBENODE_GC_SETUP_RUNTIMES=$RUNTIME bash "$ROOT/scripts/setup.sh"
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH"
cd "$ROOT"

# containerd keeps each image twice (its packed content and the unpacked snapshot), cri-o and Docker once:
# half the tmpfs gives them the same fill level
IMAGEFS_SIZE=160M
[ "$RUNTIME" = crio ] && IMAGEFS_SIZE=80M
[ "$RUNTIME" = cri-dockerd ] && IMAGEFS_SIZE=80M
WORKDIR=${KUBENODE_GC_DEMO_DIR:-$(mktemp -d /tmp/kubenode-gc-demo.XXXXXX)}
cleanup() {
  if [ "${KUBENODE_GC_DEMO_KEEP:-0}" != 1 ]; then
    python -m devtools.cli down --workdir "$WORKDIR" || true
  else
    echo "$RUNTIME left running: endpoint ${ENDPOINT:-unknown} (work dir $WORKDIR)"
  fi
}
trap cleanup EXIT

# The sample images and pods fill about 73 % of this imagefs; the images in use
# take about 35 %, so the node's policy (high 70 %, low 60 %) can be met.
echo "==== starting $RUNTIME (image filesystem on a $IMAGEFS_SIZE tmpfs) in $WORKDIR"
ENDPOINT=$(python -m devtools.cli up --workdir "$WORKDIR" --imagefs-size "$IMAGEFS_SIZE" --runtime "$RUNTIME")
echo "==== filling it with sample images and pods"
python -m devtools.cli fill --workdir "$WORKDIR"

export ANSIBLE_COLLECTIONS_PATH
ANSIBLE_COLLECTIONS_PATH=$(python -m devtools.cli collections-path)
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0
echo "==== ansible-playbook demo/cri_info.yml"
ansible-playbook -i localhost, -c local -e "ansible_python_interpreter=$VENV/bin/python" \
  -e "demo_cri_endpoint=$ENDPOINT" demo/cri_info.yml

# The demo node's kubelet configuration and its inventory: this machine, reached
# locally, with the embedded runtime's paths instead of a real node's.
mkdir -p "$WORKDIR/kubelet" "$WORKDIR/containers"
cat >"$WORKDIR/kubelet/config.yaml" <<'YAML'
# The demo node's kubelet configuration (a kubeadm-style file).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 60
imageMinimumGCAge: 1s
YAML
REPORT_DIR=${KUBENODE_GC_REPORT_DIR:-$PWD/kubenode-gc-report}
# the cleanup's history records outlive the demo's work directory (removed at the end)
HISTORY_DIR=${KUBENODE_GC_DEMO_HISTORY_DIR:-$PWD/kubenode-gc-history}
cat >"$WORKDIR/inventory.yml" <<YAML
all:
  hosts:
    demo-node:
      ansible_connection: local
      ansible_python_interpreter: $VENV/bin/python
      kubenode_gc_cri_endpoint: $ENDPOINT
      kubenode_gc_pod_logs_dir: $WORKDIR/pod-logs
      kubenode_gc_container_logs_dir: $WORKDIR/containers
      kubenode_gc_ledger_path: $WORKDIR/image-ledger.json
      kubenode_gc_cleanup_history_dir: $HISTORY_DIR
      kubenode_gc_report_dir: $REPORT_DIR
      kubenode_gc_container_min_age: 0s
      # a one-shot cleanup: image_gc has no sighting history here yet (see kubenode.gc.cleanup)
      kubenode_gc_cleanup_image_min_age: 0s
      kubenode_gc_keep_images: [docker.io/library/busybox:1.36]
      # the desired policy (the kubenode.gc.kubelet_gc / containerd_storage variables)
      kubelet_gc_config_path: $WORKDIR/kubelet/config.yaml
      kubelet_gc_image_gc_high_threshold_percent: 70
      kubelet_gc_image_gc_low_threshold_percent: 60
      kubelet_gc_image_minimum_gc_age: 1s
      containerd_storage_config_path: $WORKDIR/config.toml
      crio_storage_config_path: $WORKDIR/crio.conf
      crio_storage_storage_conf_path: $WORKDIR/storage.conf
      crio_storage_dropin_dir: $WORKDIR/crio.conf.d
YAML

echo "==== ansible-playbook kubenode.gc.audit (the node is over its high threshold)"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.audit
echo "==== ansible-playbook kubenode.gc.cleanup --check (the plan; nothing changes)"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.cleanup --check
echo "==== ansible-playbook kubenode.gc.cleanup (down to the low threshold)"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.cleanup
echo "==== ansible-playbook kubenode.gc.audit (again: the report shows the change)"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.audit

echo
echo "The audit report: $REPORT_DIR/report.html (and report.md, report.json next to it)"
# what the cleanup removed, by name, from its history record (kept in $HISTORY_DIR)
python - "$HISTORY_DIR" <<'PY'
import glob, json, os, sys
records = sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))
if not records:
    sys.exit("no cleanup history record in %s" % sys.argv[1])
with open(records[-1], encoding="utf-8") as f:
    record = json.load(f)
images = record.get("images") or []
print("The cleanup removed %d image(s) (history record: %s):" % (len(images), records[-1]))
for image in images:
    print("  %s  %d bytes" % ((image.get("repo_tags") or image.get("repo_digests") or [image["id"]])[0], image.get("size") or 0))
PY
# one line for the fleet, with the change since the audit before the cleanup
python - "$REPORT_DIR" <<'PY'
import glob, json, os, sys
sys.path.insert(0, os.environ["ANSIBLE_COLLECTIONS_PATH"])
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_fleet import history_point, summary_line
report_dir = sys.argv[1]
with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
    report = json.load(f)
history = []
for path in glob.glob(os.path.join(report_dir, "history", "report-*.json")):
    with open(path, encoding="utf-8") as f:
        history.append(history_point(json.load(f)))
print("Fleet: " + summary_line(report, [p for p in history if p]))
PY
