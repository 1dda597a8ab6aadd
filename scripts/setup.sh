#!/usr/bin/env bash
# Install everything the demo and the tests need on a Debian 12 machine, as root.
# Safe to run again: it installs only what is missing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}

APT_PACKAGES=(
  containerd runc                  # the real runtime the harness starts (containerd 1.6)
  conmon skopeo libseccomp2 libsqlite3-0  # what cri-o (../shared/runtimes) needs beside it
  busybox-static                   # payload of the offline-built test images
  python3 python3-venv             # the project venv (controller side)
  python3-grpcio python3-protobuf  # Debian's CRI libraries: one leg of the module tests
  python3-yaml python3-ruamel.yaml python3-tomlkit  # Debian's config-file libraries
  docker.io debootstrap            # node containers for Molecule and the fleet tests
  docker-registry                  # the registry on the loopback the tests pull every image from (devtools/registry.py)
  git tar util-linux
  shellcheck                       # ansible-test sanity lints the shell scripts with it
  chromium fonts-dejavu-core       # headless browser tests: the audit report (tests/report), the docs site (release checks)
  prometheus                       # promtool check metrics: the audit's node_exporter textfile (tests/integration/test_audit_metrics.py)
)

# KUBENODE_GC_SETUP_RUNTIMES (space-separated: containerd-1.6 containerd-1.7 containerd-2.1 crio cri-dockerd) limits the set-up to
# what those runtimes need: the demo sets it to the one runtime it runs, so it installs and fetches nothing else
# (no Docker, debootstrap or Chromium, which only the tests use; no containerd 1.7 or 2.x for containerd 1.6).
# Unset: everything the tests need.
SETUP_RUNTIMES=${KUBENODE_GC_SETUP_RUNTIMES:-}
if [ -n "$SETUP_RUNTIMES" ]; then
  # every runtime pulls its sandbox image from the registry on the loopback (docker-registry, skopeo pushes)
  APT_PACKAGES=(containerd runc busybox-static python3 python3-venv git tar util-linux docker-registry skopeo)
  case " $SETUP_RUNTIMES " in *" crio "*) APT_PACKAGES+=(conmon libseccomp2 libsqlite3-0) ;; esac
  # Debian's dockerd behind cri-dockerd (../shared/runtimes); its own network namespace needs iproute2
  case " $SETUP_RUNTIMES " in *" cri-dockerd "*) APT_PACKAGES+=(docker.io iproute2) ;; esac
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages and mounts tmpfs for containerd)." >&2
  exit 1
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  # other installs may run at the same time: wait for the dpkg lock instead of failing
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

stamp="$VENV/.kubenode-gc-requirements"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$ROOT/tests/requirements.txt" "$stamp"; then
  echo "setup.sh: preparing $VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tests/requirements.txt"
  cp "$ROOT/tests/requirements.txt" "$stamp"
fi

# containerd 1.7 (Debian trixie) and 2.x (Debian sid) for the runtime matrix: fetched once with a
# private apt configuration into .cache/runtimes/containerd-<version>/ (the host's apt sources stay
# untouched); cri-o comes from ../shared/runtimes or $KUBENODE_GC_CRIO_DIR.
# shellcheck disable=SC2086  # one argument per runtime
(cd "$ROOT" && "$VENV/bin/python" -m devtools.fetch $SETUP_RUNTIMES >/dev/null)
