#!/usr/bin/env bash
# Build the kubenode.gc execution environment with `ansible-builder build`, as a user would
# (docs/execution-environment.md), from this checkout and without any container registry:
#
#   bash tests/ee/build.sh                -> prints the image name (kubenode-gc/ee:<hash>)
#   bash tests/ee/build.sh --rootfs-only  -> only what needs no Docker: the base's debootstrap (a tar in
#                                            .cache/) and ansible-builder's venv
#
# 1. the base image: Debian 12 by debootstrap + `docker import` (as the node images), with
#    python3, pip and venv, openssh-client, and a small package-manager shim: ansible-builder's
#    scripts call dnf's `install -y PKG...` and `clean all`, the shim runs apt-get for them
#    (EE option package_manager_path);
# 2. the EE: tests/ee/execution-environment.yml with that base image and the collection
#    tarball of this checkout in place of the Galaxy release; ansible-builder installs
#    ansible-core, ansible-runner and the collection's Python requirements from PyPI and its
#    bindep system packages with apt.
# Images are tagged with a hash of what makes them and built only when missing.
# ansible-builder comes from .cache/release-tools (tests/release/requirements.txt), made when missing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# the Debian archive the host's own apt sources name (no mirror host is written in this repository)
MIRROR=${KUBENODE_GC_DEBIAN_MIRROR:-$(cd "$ROOT" && /usr/bin/python3 -m devtools.fetch --mirror)}
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}

# shellcheck disable=SC2016  # the shim's own expansions, written into the image as they are
PKGMGR_SHIM='#!/bin/sh
# ansible-builder calls dnf: "install -y [opts] PKG..." and "clean all"; do it with apt-get
case "$1" in
  install) shift; [ "${1:-}" = -y ] && shift
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive exec apt-get install -y -q --no-install-recommends "$@" ;;
  clean) rm -rf /var/lib/apt/lists/*; exec apt-get clean ;;
  *) exec apt-get "$@" ;;
esac'

base_image() { echo "kubenode-gc/ee-base:bookworm-$( (declare -f base_rootfs; echo "$PKGMGR_SHIM") | sha256sum | cut -c1-12)"; }

# the base's root filesystem as a tar in .cache (debootstrap needs no Docker: --rootfs-only makes just this)
base_rootfs() {
  local tar work root
  tar="$ROOT/.cache/$(base_image | tr ':/' '--').tar"
  if [ ! -s "$tar" ]; then
    work=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    echo "tests/ee/build.sh: debootstrap bookworm for the EE base image (about a minute)" >&2
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates,openssh-client \
      bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
      tail -20 "$work/debootstrap.log" >&2
      return 1
    }
    root=$work/rootfs
    printf '%s\n' "$PKGMGR_SHIM" >"$root/usr/local/bin/ee-pkgmgr"
    chmod 0755 "$root/usr/local/bin/ee-pkgmgr"
    # ansible-builder runs `python3 -m ensurepip --root /`, which Debian refuses for the system Python:
    # pip is there already (python3-pip), so that call has nothing to do
    printf '%s\n' "import pip  # noqa: F401  (Debian's python3-pip; ensurepip is disabled for the system Python)" \
      >"$root/usr/lib/python3.11/ensurepip/__main__.py"
    # the certificate authorities this machine adds to Debian's (a TLS-intercepting proxy's, on the way to PyPI)
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
      cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
      chroot "$root" update-ca-certificates >/dev/null
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$ROOT/.cache"
    tar -C "$root" -cf "$tar.part" . && mv "$tar.part" "$tar"
  fi
  echo "$tar"
}

build_base() {
  local image tar
  image=$(base_image)
  docker image inspect "$image" >/dev/null 2>&1 && return 0
  tar=$(base_rootfs)
  docker import -c 'CMD ["/bin/bash"]' "$tar" "$image" >/dev/null
}

# shellcheck source=scripts/tool-venv.sh
. "$ROOT/scripts/tool-venv.sh"
builder() {
  echo "$(tool_venv "$ROOT/.cache/release-tools" "$ROOT/tests/release/requirements.txt")/bin/ansible-builder"
}

build_ee() {
  "$VENV/bin/python" - "$HERE/execution-environment.yml" "$work/execution-environment.yml" "$(base_image)" "$(basename "$tarball")" "$image" <<'PY'
import sys
import yaml
src, dest, base, tarball, image = sys.argv[1:]
with open(src, encoding="utf-8") as f:
    ee = yaml.safe_load(f)
ee["images"]["base_image"]["name"] = base
ee["dependencies"]["galaxy"] = {"collections": [{"name": "/build/collection/" + tarball, "type": "file"}]}
ee.setdefault("additional_build_files", []).append({"src": tarball, "dest": "collection"})
ee.setdefault("options", {})["package_manager_path"] = "/usr/local/bin/ee-pkgmgr"
ee["options"]["tags"] = [image]
with open(dest, "w", encoding="utf-8") as f:
    yaml.safe_dump(ee, f, sort_keys=False)
PY
  echo "tests/ee/build.sh: ansible-builder build $image (a few minutes)" >&2
  (cd "$work" && DOCKER_BUILDKIT=0 "$(builder)" build --container-runtime docker -f execution-environment.yml \
    -c context -v 2 >"$work/build.log" 2>&1) || {
    tail -40 "$work/build.log" >&2
    return 1
  }
}
if [ "${1:-}" = --rootfs-only ]; then
  base_rootfs >/dev/null
  builder >/dev/null
  exit 0
fi
build_base
work=$(mktemp -d /tmp/kubenode-gc-ee.XXXXXX)
trap 'rm -rf "$work"' EXIT
tarball=$("$VENV/bin/ansible-galaxy" collection build --force --output-path "$work" "$ROOT" | sed -n 's/^Created collection for .* at //p')
tar_hash=$( (tar -xOzf "$tarball" | sha256sum; cat "$HERE/execution-environment.yml"; declare -f build_ee) | sha256sum | cut -c1-12)
base=$(base_image)
image="kubenode-gc/ee:${base##*-}-$tar_hash"
docker image inspect "$image" >/dev/null 2>&1 || build_ee
echo "$image"
