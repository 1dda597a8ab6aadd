#!/usr/bin/env bash
# Build the node images the Molecule scenarios and fleet tests run on, offline
# from a registry's point of view: debootstrap Debian 12 from the Debian mirror,
# then `docker import`. systemd is PID 1 and starts the runtime; no Python CRI
# libraries are installed (the kubenode.gc.node_prereqs role does that).
#
#   bash tests/node-image/build.sh [RUNTIME...]
#
# RUNTIME (default containerd-1.6), one image name printed per RUNTIME, in order:
#   containerd-1.6  Debian 12's containerd (the base image)
#   containerd-1.7  the base image with the containerd binaries of Debian trixie's package
#                   from $KUBENODE_GC_NODE_CONTAINERD_1_7 (a directory with containerd,
#                   containerd-shim-runc-v2 and ctr), config version 2
#   containerd-2.1    the same with Debian sid's package from $KUBENODE_GC_NODE_CONTAINERD_2_1,
#                   config version 3
#   crio            the base image with containerd masked and a crio.service for cri-o 1.37;
#                   cri-o's binaries are not in the image: run it with ../shared/runtimes
#                   (or $KUBENODE_GC_CRIO_DIR) mounted read-only at /opt/cri-o/bin
#   cri-dockerd     the base image with Debian 12's docker.io (dockerd 20.10, from the Debian archive
#                   the base came from), dockerd's daemon.json (no iptables, no bridge, the OCI
#                   wrapper runtime of devtools/runc-oom-wrapper as its default runtime), containerd's
#                   CRI plugin off and a cri-dockerd.service for cri-dockerd 0.4.3, whose binary is
#                   not in the image either: ../shared/runtimes mounted at /opt/cri-o/bin
#   all             every one of them
#
# `python -m devtools.cli node-image RUNTIME...` sets those directories from devtools.fetch
# (Debian's packages fetched with a private apt configuration into .cache/runtimes).
# Images are tagged with a hash of the code and files that make them and built only when
# missing; the variants derive from the base image in parallel.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the Debian archive the host's own apt sources name (no mirror host is written in this repository)
MIRROR=${KUBENODE_GC_DEBIAN_MIRROR:-$(cd "$HERE/../.." && /usr/bin/python3 -m devtools.fetch --mirror)}
RUNTIMES=(containerd-1.6 containerd-1.7 containerd-2.1 crio cri-dockerd)

# a tag hashes the code and files that make the image (declare -f: the function's text)
base_image() { echo "kubenode-gc/node:bookworm-$( (declare -f build_base; cat "$HERE/containerd-config.toml") | sha256sum | cut -c1-12)"; }

# the directory of a containerd variant's binaries
bin_dir_of() {
  local dir
  case $1 in containerd-1.7) dir=${KUBENODE_GC_NODE_CONTAINERD_1_7:-} ;; containerd-2.1) dir=${KUBENODE_GC_NODE_CONTAINERD_2_1:-} ;; esac
  if [ -z "$dir" ] || [ ! -x "$dir/containerd" ]; then
    echo "build.sh: $1 needs its containerd binaries: run python -m devtools.cli node-image $1" >&2
    return 1
  fi
  echo "$dir"
}

# files of each variant (they enter its tag)
variant_files() {
  case $1 in
    containerd-1.7) echo "$HERE/containerd-config.toml" ;;
    containerd-2.1) echo "$HERE/containerd-config-v3.toml" ;;
    crio) echo "$HERE/crio/crio.service $HERE/crio/crio.conf $HERE/crio/00-kubenode-node.conf $HERE/crio/storage.conf $HERE/crio/policy.json" ;;
    cri-dockerd) echo "$HERE/docker/cri-dockerd.service $HERE/docker/daemon.json $HERE/docker/containerd-no-cri.toml $HERE/../../devtools/runc-oom-wrapper" ;;
  esac
}

image_of() {
  local runtime=$1 files binaries=""
  [ "$runtime" = containerd-1.6 ] && { base_image; return; }
  files=$(variant_files "$runtime")
  case $runtime in containerd-*) binaries=$(bin_dir_of "$runtime") || return 1 ;; esac
  # shellcheck disable=SC2086
  echo "kubenode-gc/node:$runtime-$( (base_image; echo "$runtime"; declare -f derive build_variant
    cat $files; [ -z "$binaries" ] || sha256sum "$binaries/containerd") | sha256sum | cut -c1-12)"
}

have() { docker image inspect "$1" >/dev/null 2>&1; }

build_base() {
  local image work
  image=$(base_image)
  have "$image" && return 0
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  echo "build.sh: debootstrap bookworm into $work (about a minute)" >&2
  # conmon, skopeo (its containers-common needs a container-network-stack: the CNI plugins)
  # and libsqlite3-0 are for cri-o; the crio image masks containerd instead. openssh-server and
  # sudo: the SSH fleet test logs in as a user with sudo (sshd starts with the node; no user has a key)
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,containerd,runc,python3,ca-certificates,iproute2,procps,kmod,conmon,skopeo,containernetworking-plugins,libsqlite3-0,libseccomp2,openssh-server,sudo \
    bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    return 1
  }
  local root="$work/rootfs"
  install -m 0644 "$HERE/containerd-config.toml" "$root/etc/containerd/config.toml"
  # No consoles in a container.
  for unit in console-getty.service getty@tty1.service systemd-logind.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
  done
  echo kubenode-node >"$root/etc/hostname"
  rm -rf "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | docker import \
    -c 'CMD ["/sbin/init"]' -c 'ENV container=docker' \
    - "$image" >/dev/null
}

# Run SCRIPT in a container of the base image with LAYER (a directory) at /layer, commit it as IMAGE.
derive() {
  local image=$1 layer=$2 script=$3 name
  name="kgc-image-build-$$-$RANDOM"
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run --name "$name" -v "$layer:/layer:ro" "$(base_image)" /bin/sh -euc "$script" >&2
  docker commit -c 'CMD ["/sbin/init"]' "$name" "$image" >/dev/null
  docker rm -f "$name" >/dev/null
}

build_variant() {
  local runtime=$1 image work bin
  image=$(image_of "$runtime")
  have "$image" && return 0
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  mkdir -p "$work/layer"
  case $runtime in
    containerd-1.7 | containerd-2.1)
      bin=$(bin_dir_of "$runtime")
      echo "build.sh: $runtime: $("$bin/containerd" --version)" >&2
      mkdir -p "$work/layer/usr/bin" "$work/layer/etc/containerd"
      cp "$bin/containerd" "$bin/containerd-shim-runc-v2" "$bin/ctr" "$work/layer/usr/bin/"
      if [ "$runtime" = containerd-2.1 ]; then
        cp "$HERE/containerd-config-v3.toml" "$work/layer/etc/containerd/config.toml"
      else
        cp "$HERE/containerd-config.toml" "$work/layer/etc/containerd/config.toml"
      fi
      derive "$image" "$work/layer" 'cp -a /layer/. /'
      ;;
    crio)
      mkdir -p "$work/layer/etc/systemd/system" "$work/layer/etc/crio/crio.conf.d" "$work/layer/etc/containers"
      cp "$HERE/crio/crio.service" "$work/layer/etc/systemd/system/"
      cp "$HERE/crio/crio.conf" "$work/layer/etc/crio/"
      cp "$HERE/crio/00-kubenode-node.conf" "$work/layer/etc/crio/crio.conf.d/"
      cp "$HERE/crio/storage.conf" "$HERE/crio/policy.json" "$work/layer/etc/containers/"
      derive "$image" "$work/layer" '
        cp -a /layer/. /
        chmod 0644 /etc/systemd/system/crio.service /etc/crio/crio.conf /etc/crio/crio.conf.d/* /etc/containers/*
        ln -sf /dev/null /etc/systemd/system/containerd.service
        rm -f /etc/systemd/system/multi-user.target.wants/containerd.service /etc/containerd/config.toml
        ln -sf /etc/systemd/system/crio.service /etc/systemd/system/multi-user.target.wants/crio.service
        mkdir -p /opt/cri-o/bin /var/lib/containers/storage /var/log/crio/pods'
      ;;
    cri-dockerd)
      mkdir -p "$work/layer/etc/systemd/system" "$work/layer/etc/docker" "$work/layer/etc/containerd" "$work/layer/usr/local/bin"
      cp "$HERE/docker/cri-dockerd.service" "$work/layer/etc/systemd/system/"
      cp "$HERE/docker/daemon.json" "$work/layer/etc/docker/"
      cp "$HERE/docker/containerd-no-cri.toml" "$work/layer/etc/containerd/config.toml"
      cp "$HERE/../../devtools/runc-oom-wrapper" "$work/layer/usr/local/bin/"
      # Debian's docker.io from the archive the base image came from (its apt sources)
      derive "$image" "$work/layer" '
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends docker.io >/dev/null
        rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
        cp -a /layer/. /
        chmod 0644 /etc/systemd/system/cri-dockerd.service /etc/docker/daemon.json /etc/containerd/config.toml
        chmod 0755 /usr/local/bin/runc-oom-wrapper
        ln -sf /etc/systemd/system/cri-dockerd.service /etc/systemd/system/multi-user.target.wants/cri-dockerd.service
        mkdir -p /opt/cri-o/bin /var/lib/docker'
      ;;
  esac
}

wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(containerd-1.6)
[ "${wanted[0]}" = all ] && wanted=("${RUNTIMES[@]}")
for runtime in "${wanted[@]}"; do
  case " ${RUNTIMES[*]} " in *" $runtime "*) ;; *) echo "build.sh: unknown runtime $runtime (one of: ${RUNTIMES[*]} all)" >&2; exit 2 ;; esac
done

for runtime in "${wanted[@]}"; do image_of "$runtime" >/dev/null || exit 2; done
build_base
pids=()
for runtime in "${wanted[@]}"; do
  [ "$runtime" = containerd-1.6 ] && continue
  build_variant "$runtime" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { echo "build.sh: building a node image failed" >&2; exit 1; }
for runtime in "${wanted[@]}"; do image_of "$runtime"; done
