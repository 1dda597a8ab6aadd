#!/usr/bin/env bash
# Prove the supported ansible-core range (tests/compat/ansible-core.txt), as root on Debian 12:
#   - every version: full `ansible-test sanity` (empty ignore file), the unit tests, and
#     tests/compat/test_smoke.py (cri_info, image_gc check and real, container_gc, kubelet_config
#     and the audit playbook against a real containerd), on the Python that version supports.
# Versions that need a newer Python than Debian 12's run in a Debian trixie tree (Python 3.13),
# debootstrapped once into the matrix cache and entered with chroot in a private mount namespace that shares
# /tmp, /proc, /sys, /dev, /run and this checkout, so the tests' containerd is the same one.
# The jobs run in parallel (KUBENODE_GC_MATRIX_JOBS, default 3); logs go to tests/output/matrix/.
#
# Usage: bash scripts/ansible-matrix.sh [SERIES...]   (e.g. 2.16 2.21; default: every version)
#   KUBENODE_GC_MATRIX_SANITY="2.16 2.22"  which series get ansible-test sanity (default: every one; "" for none)
# Called by `bash scripts/test.sh matrix`, which sets up the project venv first.
# shellcheck disable=SC2317  # the job functions run through start_job "$@"
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# in_trixie CMD...: run CMD in the trixie tree, in the current directory, with this machine's /tmp,
# /proc, /sys, /dev, /run and checkout; the mounts vanish with the private mount namespace.
in_trixie() {
  unshare --mount --propagation private -- /bin/sh -s "$TRIXIE" "$ROOT" "$PWD" "$@" <<'SH'
set -e
root=$1 repo=$2 cwd=$3; shift 3
mount -t proc proc "$root/proc"
for d in /sys /dev /run /tmp; do mount --rbind "$d" "$root$d"; done
mkdir -p "$root$repo" && mount --bind "$repo" "$root$repo"
exec chroot "$root" /usr/bin/env -C "$cwd" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
SH
}

if [ "${1:-}" = --in-trixie ]; then  # the smoke test's ansible-playbook wrapper
  TRIXIE=$2
  shift 2
  in_trixie "$@"
  exit
fi


VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
# The matrix cache (ansible-core venvs, sanity HOMEs, the trixie tree) is the machine's, not the checkout's: every clone
# on this machine reuses it, so only a machine's first run pays for building it. One run at a time uses it (the lock).
CACHE=${KUBENODE_GC_MATRIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubenode-gc/ansible-core}
OUT=$ROOT/tests/output/matrix
# the Debian archive the host's own apt sources name (no mirror host is written in this repository)
MIRROR=${KUBENODE_GC_DEBIAN_MIRROR:-$(cd "$ROOT" && /usr/bin/python3 -m devtools.fetch --mirror)}
JOBS=${KUBENODE_GC_MATRIX_JOBS:-3}
cd "$ROOT"
mkdir -p "$CACHE" "$OUT"
exec 9>"$CACHE/.lock"
flock 9
rm -f "$OUT"/*.log

# series version where (host = Debian 12's Python 3.11, trixie = the trixie tree's Python 3.13)
mapfile -t MATRIX < <(grep -v '^\s*#' tests/compat/ansible-core.txt | grep .)
SANITY=${KUBENODE_GC_MATRIX_SANITY-$(printf '%s\n' "${MATRIX[@]}" | cut -d' ' -f1 | tr '\n' ' ')}
selected() { [ "${#SELECT[@]}" -eq 0 ] && return 0; local s; for s in "${SELECT[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
SELECT=("$@")
pytest_pin=$(grep -i '^pytest==' tests/requirements.txt)

# -- environments -------------------------------------------------------------

host_venv() {  # host_venv VERSION -> path of a venv with that ansible-core (Debian's CRI libraries)
  local v=$1 dir=$CACHE/host-$1
  if [ ! -x "$dir/bin/ansible-playbook" ] || [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$v $pytest_pin" ]; then
    rm -rf "$dir"
    /usr/bin/python3 -m venv --system-site-packages "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check "ansible-core==$v" "$pytest_pin"
    echo "$v $pytest_pin" >"$dir/.stamp"
  fi
  echo "$dir"
}

TRIXIE_PACKAGES="python3 python3-venv python3-grpcio python3-protobuf python3-ruamel.yaml python3-tomlkit python3-yaml shellcheck git ca-certificates"
trixie_versions=$(printf '%s\n' "${MATRIX[@]}" | awk '$3 == "trixie" {print $2}' | tr '\n' ' ')
TRIXIE=$CACHE/trixie-$(printf '%s|%s|%s' "$TRIXIE_PACKAGES" "$trixie_versions" "$pytest_pin" | sha256sum | cut -c1-12)

trixie_tree() {
  [ -f "$TRIXIE/.complete" ] && return 0
  echo "ansible-matrix: debootstrap Debian trixie (Python 3.13) into $TRIXIE" >&2
  rm -rf "$TRIXIE" "$TRIXIE.tmp"
  # minbase only; apt inside the tree then resolves the packages (debootstrap does not follow
  # virtual packages such as python3-grpcio's libre2)
  debootstrap --variant=minbase --include=ca-certificates trixie "$TRIXIE.tmp" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 || {
    tail -20 "$OUT/debootstrap.log" >&2
    return 1
  }
  cp /etc/resolv.conf "$TRIXIE.tmp/etc/resolv.conf"
  # this machine's trust store, so pip inside the tree trusts what pip here trusts
  cp /etc/ssl/certs/ca-certificates.crt "$TRIXIE.tmp/etc/ssl/certs/ca-certificates.crt"
  mv "$TRIXIE.tmp" "$TRIXIE"
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  in_trixie /bin/sh -c "apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends $TRIXIE_PACKAGES" >"$OUT/trixie-apt.log" 2>&1 || {
    tail -20 "$OUT/trixie-apt.log" >&2
    return 1
  }
  local v
  for v in $trixie_versions; do
    in_trixie /usr/bin/python3 -m venv --system-site-packages "/opt/ansible-core-$v"
    in_trixie "/opt/ansible-core-$v/bin/pip" install -q --disable-pip-version-check "ansible-core==$v" "$pytest_pin" >>"$OUT/trixie-pip.log" 2>&1 || {
      tail -20 "$OUT/trixie-pip.log" >&2
      return 1
    }
  done
  rm -rf "$TRIXIE/var/cache/apt/archives/"*.deb
  touch "$TRIXIE/.complete"
  # older trees are not needed any more
  find "$CACHE" -maxdepth 1 -name 'trixie-*' ! -path "$TRIXIE" ! -name '*.tmp' -exec rm -rf {} + 2>/dev/null || true
}

# The command prefix that runs a version's tools: run_in WHERE VERSION TOOL ARGS...
run_in() {
  local where=$1 v=$2 tool=$3
  shift 3
  if [ "$where" = host ]; then
    "$CACHE/host-$v/bin/$tool" "$@"
  else
    in_trixie "/opt/ansible-core-$v/bin/$tool" "$@"
  fi
}

# The collection as ansible-test wants it: the files git would commit, at ansible_collections/kubenode/gc.
collection_copy() {
  local dest=$1/ansible_collections/kubenode/gc
  mkdir -p "$dest"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$dest"
  else
    tar --exclude=./.venv --exclude=./.cache --exclude=./tests/output -cf - . | tar -xf - -C "$dest"
  fi
  echo "$dest"
}

# -- jobs ----------------------------------------------------------------------

WORK=$(mktemp -d /tmp/kubenode-gc-matrix.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

job_sanity() {  # job_sanity WHERE VERSION
  local where=$1 v=$2 dest pyver pipv
  dest=$(collection_copy "$WORK/sanity-$v")
  pyver=$(run_in "$where" "$v" python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  # the offline stand-in for ansible-test's pip bootstrap script, under the name this version caches
  pipv=$(run_in "$where" "$v" python -c 'import os, re, ansible_test
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='"'"'([0-9.]+)'"'"'", src).group(1))')
  # A sanity requirement pinned to a source archive on GitHub (ansible-test 2.22.0rc1: dill, for Python 3.15)
  # cannot be fetched where only PyPI is reachable: that project's newest PyPI release stands in for it.
  run_in "$where" "$v" python -c 'import glob, os, re, ansible_test
for path in glob.glob(os.path.join(os.path.dirname(ansible_test.__file__), "_data", "requirements", "*.txt")):
    text = open(path).read()
    offline = re.sub(r"(?m)^([A-Za-z0-9_.-]+) @ https://github\.com/\S+", r"\1", text)
    if offline != text:
        open(path, "w").write(offline)
        print("ansible-matrix: %s: a GitHub archive requirement replaced by its PyPI release" % os.path.basename(path))'
  # Each version gets its own HOME, so its own ~/.ansible/test (sanity venvs, caches): versions whose sanity
  # requirements are equal share a venv name, and parallel jobs (or another checkout's sanity run) would install
  # into the same venv at once.
  local home=$CACHE/home-$v
  [ "$where" = host ] || home=/root/home-$v  # in the trixie tree
  local home_here=$home
  [ "$where" = host ] || home_here=$TRIXIE$home
  mkdir -p "$home_here/.ansible/test/cache"
  cp scripts/ansible-test-get-pip.py "$home_here/.ansible/test/cache/get_pip_${pipv//./_}.py"
  if [ "$where" = host ]; then
    (cd "$dest" && HOME=$home "$CACHE/host-$v/bin/ansible-test" sanity --requirements --python "$pyver" --color no)
  else
    (cd "$dest" && in_trixie /usr/bin/env HOME="$home" "/opt/ansible-core-$v/bin/ansible-test" sanity --requirements --python "$pyver" --color no)
  fi
}

job_tests() {  # job_tests WHERE VERSION: unit tests, then the smoke test, under that ansible-core
  local where=$1 v=$2 collections playbook python
  run_in "$where" "$v" python -m pytest -p no:cacheprovider -q --basetemp "$WORK/unit-$v" tests/unit
  collections=$WORK/collections-$v
  run_in "$where" "$v" ansible-galaxy collection install --offline -p "$collections" "$TARBALL" >/dev/null
  if [ "$where" = host ]; then
    playbook=$CACHE/host-$v/bin/ansible-playbook
  else
    playbook="bash $ROOT/scripts/ansible-matrix.sh --in-trixie $TRIXIE /opt/ansible-core-$v/bin/ansible-playbook"
  fi
  python=/usr/bin/python3  # Debian 12's (CRI libraries from Debian), or trixie's Python 3.13
  KUBENODE_GC_COMPAT_ANSIBLE_PLAYBOOK=$playbook KUBENODE_GC_COMPAT_PYTHON=$python KUBENODE_GC_COMPAT_COLLECTIONS=$collections \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rA --basetemp "$WORK/smoke-$v" tests/compat/test_smoke.py
}

echo "ansible-matrix: preparing environments"
prep_pids=()
need_trixie=0
for line in "${MATRIX[@]}"; do
  read -r series v where <<<"$line"
  selected "$series" || continue
  if [ "$where" = host ]; then
    host_venv "$v" >"$OUT/venv-$series.log" 2>&1 &
    prep_pids+=($!)
  else
    need_trixie=1
  fi
done
if [ "$need_trixie" = 1 ]; then
  trixie_tree &
  prep_pids+=($!)
fi
# one tarball for every version
TARBALL=$("$VENV/bin/ansible-galaxy" collection build --force --output-path "$WORK" . | sed -n 's/^Created collection for .* at //p')
for pid in "${prep_pids[@]}"; do
  wait "$pid" || { cat "$OUT"/venv-*.log >&2; echo "ansible-matrix: preparing an environment failed" >&2; exit 1; }
done

names=()
declare -A jobs=()
start_job() {  # start_job NAME FUNCTION ARGS...: in the background, output in $OUT/NAME.log
  local name=$1
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  ("$@") >"$OUT/$name.log" 2>&1 &
  jobs[$name]=$!
  names+=("$name")
}
for line in "${MATRIX[@]}"; do
  read -r series v where <<<"$line"
  selected "$series" || continue
  for s in $SANITY; do
    [ "$s" = "$series" ] && start_job "sanity-$series" job_sanity "$where" "$v"
  done
done
for line in "${MATRIX[@]}"; do
  read -r series v where <<<"$line"
  selected "$series" || continue
  start_job "tests-$series" job_tests "$where" "$v"
done

failed=0
for name in "${names[@]}"; do
  if wait "${jobs[$name]}"; then
    printf 'ansible-matrix: %-14s ok    (%s)\n' "$name" "$(grep -E '^[0-9]+ passed|passed|Running sanity test' "$OUT/$name.log" | tail -1)"
  else
    failed=1
    printf 'ansible-matrix: %-14s FAILED, log %s:\n' "$name" "$OUT/$name.log"
    tail -60 "$OUT/$name.log"
  fi
done
[ "$failed" = 0 ] && echo "ansible-matrix: every version passed"
exit "$failed"
