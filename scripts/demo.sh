#!/usr/bin/env bash
# Demo on a Debian 12 machine, as root: start a real containerd on a small tmpfs,
# fill it with sample images and pods, and run ansible-playbook against it:
# demo/cri_info.yml, then the fleet playbooks kubenode.gc.audit (report in
# ./kubenode-gc-report) and kubenode.gc.cleanup, with this machine as the node.
# KUBENODE_GC_DEMO_KEEP=1 leaves containerd running afterwards (stop it with
# "python -m devtools.cli down --workdir <dir>").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH"
cd "$ROOT"

WORKDIR=${KUBENODE_GC_DEMO_DIR:-$(mktemp -d /tmp/kubenode-gc-demo.XXXXXX)}
cleanup() {
  if [ "${KUBENODE_GC_DEMO_KEEP:-0}" != 1 ]; then
    python -m devtools.cli down --workdir "$WORKDIR" || true
  else
    echo "containerd left running: endpoint unix://$WORKDIR/containerd.sock"
  fi
}
trap cleanup EXIT

echo "==== starting containerd (root on a 256 MiB tmpfs) in $WORKDIR"
ENDPOINT=$(python -m devtools.cli up --workdir "$WORKDIR" --imagefs-size 256M)
echo "==== filling it with sample images and pods"
python -m devtools.cli fill --workdir "$WORKDIR"

export ANSIBLE_COLLECTIONS_PATH
ANSIBLE_COLLECTIONS_PATH=$(python -m devtools.cli collections-path)
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0
echo "==== ansible-playbook demo/cri_info.yml"
ansible-playbook -i localhost, -c local -e "ansible_python_interpreter=$VENV/bin/python" \
  -e "demo_cri_endpoint=$ENDPOINT" demo/cri_info.yml

# The demo node's kubelet configuration and its inventory: this machine, reached
# locally, with the embedded containerd's paths instead of a real node's.
mkdir -p "$WORKDIR/kubelet" "$WORKDIR/containers"
cat >"$WORKDIR/kubelet/config.yaml" <<'YAML'
# The demo node's kubelet configuration (a kubeadm-style file).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 30
imageGCLowThresholdPercent: 15
imageMinimumGCAge: 1s
YAML
REPORT_DIR=${KUBENODE_GC_REPORT_DIR:-$PWD/kubenode-gc-report}
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
      kubenode_gc_cleanup_history_dir: $WORKDIR/history
      kubenode_gc_report_dir: $REPORT_DIR
      kubenode_gc_container_min_age: 0s
      # a one-shot cleanup: image_gc has no sighting history here yet (see kubenode.gc.cleanup)
      kubenode_gc_cleanup_image_min_age: 0s
      kubenode_gc_keep_images: [docker.io/library/busybox:1.36]
      # the desired policy (the kubenode.gc.kubelet_gc / containerd_storage variables)
      kubelet_gc_config_path: $WORKDIR/kubelet/config.yaml
      kubelet_gc_image_gc_high_threshold_percent: 30
      kubelet_gc_image_gc_low_threshold_percent: 15
      kubelet_gc_image_minimum_gc_age: 1s
      containerd_storage_config_path: $WORKDIR/config.toml
YAML

echo "==== ansible-playbook kubenode.gc.audit"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.audit
echo "==== ansible-playbook kubenode.gc.cleanup --check (dry run)"
ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.cleanup --check
echo "==== ansible-playbook kubenode.gc.cleanup"
ANSIBLE_CALLBACKS_ENABLED=kubenode.gc.gc_summary ansible-playbook -i "$WORKDIR/inventory.yml" kubenode.gc.cleanup
echo
echo "The audit report: $REPORT_DIR/report.html (and report.md, report.json next to it)"
