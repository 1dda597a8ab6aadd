#!/usr/bin/env bash
# Demo on a Debian 12 machine, as root: start a real containerd on a small tmpfs,
# fill it with sample images and pods, and run ansible-playbook against it.
# KUBENODE_GC_DEMO_KEEP=1 leaves containerd running afterwards (stop it with
# "python -m tests.harness.cli down --workdir <dir>").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH"
cd "$ROOT"

WORKDIR=${KUBENODE_GC_DEMO_DIR:-$(mktemp -d /tmp/kubenode-gc-demo.XXXXXX)}
cleanup() {
  if [ "${KUBENODE_GC_DEMO_KEEP:-0}" != 1 ]; then
    python -m tests.harness.cli down --workdir "$WORKDIR" || true
  else
    echo "containerd left running: endpoint unix://$WORKDIR/containerd.sock"
  fi
}
trap cleanup EXIT

echo "==== starting containerd (root on a 256 MiB tmpfs) in $WORKDIR"
ENDPOINT=$(python -m tests.harness.cli up --workdir "$WORKDIR" --imagefs-size 256M)
echo "==== filling it with sample images and pods"
python -m tests.harness.cli fill --workdir "$WORKDIR"

export ANSIBLE_COLLECTIONS_PATH
ANSIBLE_COLLECTIONS_PATH=$(python -m tests.harness.cli collections-path)
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0
echo "==== ansible-playbook demo/cri_info.yml"
ansible-playbook -i localhost, -c local -e "ansible_python_interpreter=$VENV/bin/python" \
  -e "demo_cri_endpoint=$ENDPOINT" demo/cri_info.yml
