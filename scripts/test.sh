#!/usr/bin/env bash
# Run every test of kubenode.gc on a Debian 12 machine, as root:
#   generated-code drift check, ansible-test sanity, unit tests, and integration
#   tests against the runtimes of the matrix: containerd 1.6 (Debian 12), 1.7
#   (trixie), 2.1 (sid), 2.2 and 2.3 and cri-o (../shared/runtimes or
#   $KUBENODE_GC_CRIO_DIR); what differs between runtimes runs on each, the rest
#   once, on containerd 1.6 (docs/development.md), where the modules run under
#   both Debian's python3-grpcio/python3-protobuf and the newest grpcio/protobuf
#   from PyPI.
#
# Usage: bash scripts/test.sh [STEP...]   (no step: all of them, as CI does)
#   steps: protogen sanity lint unit report integration bench molecule fleet matrix release
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
export PATH="$VENV/bin:$PATH"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
cd "$ROOT"

STEPS=("$@")
want() {
  [ "${#STEPS[@]}" -eq 0 ] && return 0
  local s
  for s in "${STEPS[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}
# Each step's header says when it started; the run ends (even when it fails) with each step's wall time, the set-up's
# (scripts/setup.sh, above) first. The background jobs (node images, the matrix, the release checks, and sanity beside
# ansible-lint, the unit tests and the report) run inside the steps they overlap.
STEP_NAME="set-up (scripts/setup.sh)" STEP_AT=0 STEP_TIMES=()
step_done() { STEP_TIMES+=("$(printf '%5d s  %s' $((SECONDS - STEP_AT)) "$STEP_NAME")"); }
step() {
  step_done
  STEP_NAME=$* STEP_AT=$SECONDS
  printf '\n==== %s  [%s UTC, %d min %02d s into the run]\n' "$*" "$(date -u +%H:%M:%S)" $((SECONDS / 60)) $((SECONDS % 60))
}
step_times() {
  step_done
  printf '\n==== wall time by step (%d s in all)\n' "$SECONDS"
  printf '%s\n' "${STEP_TIMES[@]}"
}

# Leave the machine as it was: a dockerd the steps start (devtools.nodes.ensure_dockerd, which writes its pid file) is
# stopped at the end; one that already ran before is left alone.
DOCKERD_PIDFILE=/run/kubenode-gc-dockerd.pid
DOCKER_WAS_UP=0
docker info >/dev/null 2>&1 && DOCKER_WAS_UP=1
TREE="" SANITY_TREE=""
finish() {
  step_times
  local name
  for name in "${!BG_PID[@]}"; do  # background jobs whose step did not come (the run stopped before it)
    kill_tree "${BG_PID[$name]}"
    wait "${BG_PID[$name]}" 2>/dev/null || true
    rm -f "${BG_LOG[$name]}" "${BG_RC[$name]}"
  done
  [ -n "$TREE" ] && rm -rf "$TREE"
  [ -n "$SANITY_TREE" ] && rm -rf "$SANITY_TREE"
  if [ "$DOCKER_WAS_UP" = 0 ] && [ -s "$DOCKERD_PIDFILE" ]; then
    local pid
    pid=$(cat "$DOCKERD_PIDFILE")
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
      echo "stopping the dockerd this run started (pid $pid)"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 60); do [ -d "/proc/$pid" ] || break; sleep 0.5; done
    fi
    rm -f "$DOCKERD_PIDFILE"
  fi
}
trap finish EXIT

# Background jobs: a step's work started early, beside the steps before it, and collected by its own step.
# bg_start [--nice] NAME COMMAND...: COMMAND (a function or a program) in a subshell (set -e holds there), its output in a
# log; --nice: at nice 19, so that it takes only the CPU the steps in the foreground leave idle. No new session: the
# kernel's autogroups would give one its own share of the CPU, whatever its nice value.
# bg_wait NAME: waits for it, prints its log, and returns its exit status (read from a file, whoever reaped the process).
declare -A BG_PID=() BG_LOG=() BG_RC=()
kill_tree() {  # kill_tree PID: PID and every process under it, children first
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
bg_start() {
  local nice=0
  [ "$1" = --nice ] && { nice=1; shift; }
  local name=$1
  shift
  BG_LOG[$name]=$(mktemp) BG_RC[$name]=$(mktemp)
  (
    trap 'echo $? >"${BG_RC[$name]}"' EXIT
    [ "$nice" = 0 ] || renice -n 19 -p "$BASHPID" >/dev/null
    "$@"
  ) >"${BG_LOG[$name]}" 2>&1 &
  BG_PID[$name]=$!
}
bg_started() { [ -n "${BG_PID[$1]:-}" ]; }
bg_collect() {  # bg_collect NAME WHAT: bg_wait NAME, and the run stops with "WHAT failed" when the job did
  local rc=0
  bg_wait "$1" || rc=$?
  [ "$rc" = 0 ] || { echo "$2 failed (exit status $rc)"; exit 1; }
}
bg_wait() {
  local name=$1 rc
  wait "${BG_PID[$name]}" 2>/dev/null || true
  cat "${BG_LOG[$name]}"
  rc=$(cat "${BG_RC[$name]}")
  rm -f "${BG_LOG[$name]}" "${BG_RC[$name]}"
  unset "BG_PID[$name]" "BG_LOG[$name]" "BG_RC[$name]"
  return "${rc:-1}"
}

if want protogen; then
step "generated protobuf code matches proto/cri_api.proto (pinned generator)"
GEN_VENV="$ROOT/.cache/protogen"
if [ ! -x "$GEN_VENV/bin/python" ] || ! cmp -s scripts/requirements-protogen.txt "$GEN_VENV/.requirements"; then
  /usr/bin/python3 -m venv "$GEN_VENV"
  "$GEN_VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-protogen.txt
  cp scripts/requirements-protogen.txt "$GEN_VENV/.requirements"
fi
"$GEN_VENV/bin/python" scripts/gen_proto.py --check
fi

# The benchmarks run before anything is started in the background, on a machine as quiet as this run can make it.
if want bench; then
step "benchmarks, short: image_gc prune against crictl rmi --prune measured in the same run (figures, nothing asserted)"
# a regression shows as a ratio above 1 (above 0.5 where image_gc removes through containerd's images API)
python -m benchmarks.image_gc_prune --short
python -m benchmarks.gc_scale --short
fi

# Background work starts here, after the benchmarks, so that it overlaps every step from sanity on: sanity, ansible-lint,
# the unit tests and the report leave one of the two cores mostly idle, and the integration step that follows them is
# CPU-bound (docs/development.md, "The test command's time"). EARLIER_STEPS: is there a step for it to overlap?
EARLIER_STEPS=0
for s in sanity lint unit report integration; do want "$s" && EARLIER_STEPS=1; done
# The node images and the execution environment the fleet and Molecule steps need (debootstrap and dpkg wait on the
# network and the disk more than on the CPU); wait_images waits for them.
# node_images: every node image at once (in parallel), for the fleet and Molecule; cached by tag
node_images() { python -m devtools.cli node-image containerd-1.6 containerd-1.7 containerd-2.1 crio cri-dockerd; }
build_images() { node_images && bash tests/ee/build.sh; }
if [ "$EARLIER_STEPS" = 1 ] && { want fleet || want molecule; }; then
  bg_start images build_images
  echo "(building the node images and the execution environment in the background, log ${BG_LOG[images]})"
fi
wait_images() {
  bg_started images || return 0
  echo "---- node images and execution environment (built in the background):"
  bg_collect images "building the node images or the execution environment"
}

run_matrix() {
  # 2.16-2.19 on Debian 12's Python 3.11, 2.20 and later in a Debian trixie tree (Python 3.13), in parallel jobs.
  # The sanity step runs the project venv's ansible-test on the same Python: when it does, the matrix leaves
  # out the sanity run of the line whose version is exactly the venv's (unless KUBENODE_GC_MATRIX_SANITY says otherwise).
  if want sanity && [ -z "${KUBENODE_GC_MATRIX_SANITY+set}" ]; then
    local own
    own=$(python -c 'import ansible.release; print(ansible.release.__version__)')
    KUBENODE_GC_MATRIX_SANITY=$(grep -v '^\s*#' tests/compat/ansible-core.txt | awk -v own="$own" 'NF && !($2 == own && $3 == "host") {printf "%s ", $1}')
    export KUBENODE_GC_MATRIX_SANITY
    echo "(ansible-test sanity of ansible-core $own runs in the sanity step; the matrix runs sanity on: $KUBENODE_GC_MATRIX_SANITY)"
  fi
  bash scripts/ansible-matrix.sh
}

# The ansible-core matrix needs neither Docker nor the node images: it runs in the background from here, at the lowest
# CPU priority, beside the steps that follow, and takes the CPU they leave idle; its log is printed at the matrix step.
# Its unit tests that start processes named kubelet take the machine-wide kubelet lock exclusively, and its smoke test
# shared, as the unit and integration tests do (devtools/kubelet_lock.py).
if want matrix && { [ "$EARLIER_STEPS" = 1 ] || want fleet || want molecule; }; then
  bg_start --nice matrix run_matrix
  echo "(the ansible-core matrix runs in the background at nice 19, log ${BG_LOG[matrix]})"
fi
# The release checks (changelog, EE metadata, galaxy-importer, the docs site) need neither Docker nor anything an
# earlier step makes: the same, from here, their log printed at the release step.
if want release && { [ "$EARLIER_STEPS" = 1 ] || want fleet || want molecule || want matrix; }; then
  bg_start --nice release bash scripts/release-checks.sh
  echo "(the release checks run in the background at nice 19, log ${BG_LOG[release]})"
fi

# The collection as ansible-test, Molecule and ansible-lint want it: a copy of
# exactly the files git would commit, at .../ansible_collections/kubenode/gc.
copy_collection() {  # copy_collection DIR: the copy at DIR/ansible_collections/kubenode/gc
  local to="$1/ansible_collections/kubenode/gc"
  mkdir -p "$to"
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
      | (cd "$ROOT" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$to"
  else
    tar -C "$ROOT" --exclude=./.venv --exclude=./.cache -cf - . | tar -xf - -C "$to"
  fi
}
collection_tree() {
  [ -n "$TREE" ] && return 0
  TREE=$(mktemp -d)
  dest="$TREE/ansible_collections/kubenode/gc"
  copy_collection "$TREE"
}

run_sanity() {  # run_sanity DIR: ansible-test sanity in its own copy of the collection, in DIR (ansible-lint's copy must
  # not see what ansible-test writes into its own); the exit trap removes DIR
  local tree=$1
  copy_collection "$tree"
  # ansible-test bootstraps pip in its sanity venvs with a script it downloads from a
  # host these machines cannot reach: give it our offline stand-in under the cached name.
  pip_version=$(python - <<'PY'
import os, re, ansible_test
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
  mkdir -p ~/.ansible/test/cache
  cp scripts/ansible-test-get-pip.py ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"
  (cd "$tree/ansible_collections/kubenode/gc" && ansible-test sanity --requirements --python 3.11 --color no)
}
if want sanity; then
step "ansible-test sanity"
SANITY_TREE=$(mktemp -d)
if want lint || want unit || want report; then
  # ansible-test runs its tests one after the other, mostly on one core: the next steps run beside it, and the step
  # "ansible-test sanity's result" after them waits for it and prints its log
  bg_start sanity run_sanity "$SANITY_TREE"
  echo "(it runs beside ansible-lint, the unit tests and the report; its log is printed after them)"
else
  run_sanity "$SANITY_TREE"
fi
fi

if want lint; then
step "ansible-lint (production profile)"
collection_tree
(cd "$dest" && ANSIBLE_COLLECTIONS_PATH="$TREE" ansible-lint --offline --profile production)
fi

if want unit; then
step "unit tests"
python -m pytest -p no:cacheprovider -n 2 tests/unit
fi

if want report; then
step "fleet audit report: 1,000 synthetic nodes, opened, sorted and filtered in headless Chromium"
# prints the generation time, the HTML size and the render time (in the whole command measured beside ansible-test
# sanity, on a busy machine); screenshots in tests/output/report-1000/
python -m pytest -p no:cacheprovider -s tests/report
fi

if bg_started sanity; then
step "ansible-test sanity's result (it ran beside ansible-lint, the unit tests and the report)"
bg_collect sanity "ansible-test sanity"
fi

if want integration; then
step "integration tests (real runtimes: containerd 1.6, 1.7, 2.1, 2.2, 2.3, cri-o, Docker Engine through cri-dockerd)"
# two workers; each (test module, runtime) pair stays on one worker (one runtime instance per module), the largest first.
# Three were tried (docs/development.md): the step was shorter, but under that load a runtime's answer took longer than
# a test's 30-s CRI timeout.
# the 25 slowest tests are listed at the end: where the step's time goes
python -m pytest -p no:cacheprovider -n 2 --dist loadgroup --durations=25 tests/integration
fi

if want fleet; then
step "fleet playbooks on real node containers (docker connection, and SSH with sudo), the audit in the execution environment"
wait_images
node_images
[ -n "$(python -m devtools.cli crio-dir)" ] \
  || echo "!!!! cri-o was NOT tested in the fleet: no ../shared/runtimes and KUBENODE_GC_CRIO_DIR unset: node-a runs containerd 1.6 !!!!"
# the execution environment, built with ansible-builder from a debootstrapped Debian base (minutes the
# first time, then cached by tag); tests/fleet/test_fleet_ssh.py runs the audit in it with ansible-runner
KUBENODE_GC_EE_IMAGE=$(bash tests/ee/build.sh)
export KUBENODE_GC_EE_IMAGE
# two workers, each test file on one, the file with the most tests first (each file starts its own node containers, with
# names and a label group of their own; each worker its own registry on a free port); --durations: where the time goes
python -m pytest -p no:cacheprovider -n 2 --dist loadfile --durations=10 tests/fleet
fi

if want molecule; then
step "Molecule: every role on real node containers"
wait_images
collection_tree
# starts dockerd when nothing runs it, builds the node images when missing (all at once, in parallel)
scenarios=${KUBENODE_GC_MOLECULE_SCENARIOS:-node_prereqs kubelet_gc containerd_storage crio_storage gc_timer}
KUBENODE_GC_CRIO_DIR=$(python -m devtools.cli crio-dir)
runtimes=(containerd-1.6 containerd-1.7 containerd-2.1)
if [ -n "$KUBENODE_GC_CRIO_DIR" ]; then
  runtimes+=(crio)
else
  scenarios=$(echo " $scenarios " | sed 's/ crio_storage / /')
  echo "!!!! cri-o was NOT tested: no ../shared/runtimes and KUBENODE_GC_CRIO_DIR unset: Molecule skips crio_storage !!!!"
fi
KUBENODE_GC_NODE_IMAGES=$(python -m devtools.cli node-image --json "${runtimes[@]}")
KUBENODE_GC_NODE_IMAGE=$(python -m devtools.cli node-image containerd-1.6)
export KUBENODE_GC_NODE_IMAGE KUBENODE_GC_NODE_IMAGES KUBENODE_GC_CRIO_DIR
molecule_lane() {  # molecule_lane LOG SCENARIO...: the scenarios one after the other, into LOG
  local log=$1 scenario
  shift
  for scenario in "$@"; do
    (cd "$dest" && ANSIBLE_COLLECTIONS_PATH="$TREE" molecule test -s "$scenario") >>"$log" 2>&1 || { echo "FAILED: $scenario" >>"$log"; return 1; }
  done
}
# Two lanes at once (their containers have their own names): one lane's waits on its nodes (boots, gc_timer's timer)
# are the other's CPU; the step is CPU-bound with two (3.6 % idle in the whole run of 11-29). Balanced by their length alone (11-29: gc_timer 8, containerd_storage 5.5, node_prereqs 4, crio_storage 4,
# kubelet_gc 3 minutes); each lane's log is printed when it ends. KUBENODE_GC_MOLECULE_SCENARIOS: one lane, in order.
lane_a="" lane_b=""
for scenario in $scenarios; do
  case "${KUBENODE_GC_MOLECULE_SCENARIOS:+one}:$scenario" in
    :containerd_storage | :crio_storage | :kubelet_gc) lane_b="$lane_b $scenario" ;;
    *) lane_a="$lane_a $scenario" ;;
  esac
done
lane_logs=$(mktemp -d)
status=0
# shellcheck disable=SC2086  # the lanes are word lists
{ molecule_lane "$lane_logs/a.log" $lane_a; echo $? >"$lane_logs/a.rc"; } &
lane_pids=($!)
if [ -n "$lane_b" ]; then
  # shellcheck disable=SC2086
  { sleep 10; molecule_lane "$lane_logs/b.log" $lane_b; echo $? >"$lane_logs/b.rc"; } &
  lane_pids+=($!)
fi
# the lanes only: a bare wait would also wait for (and reap) the matrix running in the background
wait "${lane_pids[@]}" || true
for lane in a b; do
  [ -f "$lane_logs/$lane.log" ] || continue
  echo "---- Molecule lane $lane:$(eval echo "\$lane_$lane")"
  cat "$lane_logs/$lane.log"
  [ "$(cat "$lane_logs/$lane.rc" 2>/dev/null || echo 1)" = 0 ] || status=1
done
rm -rf "$lane_logs"
[ "$status" = 0 ] || { echo "Molecule failed (see the lanes above)"; exit 1; }
fi

if want matrix; then
step "ansible-core 2.16 to 2.22 (tests/compat/ansible-core.txt): sanity, unit and smoke tests on each"
if bg_started matrix; then
  echo "(it ran in the background beside the steps from sanity on)"
  bg_collect matrix "the ansible-core matrix"
else
  run_matrix
fi
fi

if want release; then
step "release checks: changelog, execution environment, galaxy-importer, docs site"
if bg_started release; then
  echo "(they ran in the background beside the steps from sanity on)"
  bg_collect release "the release checks"
else
  bash scripts/release-checks.sh
fi
fi
