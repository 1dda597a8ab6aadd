#!/usr/bin/env bash
# Build the Debian 12 node image the Molecule scenarios and fleet tests run on,
# offline from a registry's point of view: debootstrap from the Debian mirror,
# then `docker import`. systemd is PID 1 and starts containerd; no Python CRI
# libraries are installed (the kubenode.gc.node_prereqs role does that).
#
#   bash tests/node-image/build.sh      prints the image name; builds only when missing
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MIRROR=${KUBENODE_GC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
hash=$(cat "$HERE/build.sh" "$HERE/containerd-config.toml" | sha256sum | cut -c1-12)
IMAGE="kubenode-gc/node:bookworm-$hash"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build.sh: debootstrap bookworm into $work (about a minute)" >&2
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,containerd,runc,python3,ca-certificates,iproute2,procps,kmod \
  bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2
  exit 1
}
root="$work/rootfs"
install -m 0644 "$HERE/containerd-config.toml" "$root/etc/containerd/config.toml"
# No consoles in a container.
for unit in console-getty.service getty@tty1.service systemd-logind.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo kubenode-node >"$root/etc/hostname"
rm -rf "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | docker import \
  -c 'CMD ["/sbin/init"]' -c 'ENV container=docker' \
  - "$IMAGE" >/dev/null
echo "$IMAGE"
