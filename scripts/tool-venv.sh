# shellcheck shell=bash
# Sourced by scripts/release-checks.sh and tests/ee/build.sh: the one way the release tools' venvs are made.
# tool_venv DIR REQUIREMENTS -> DIR, (re)created when the requirements changed
tool_venv() {
  local dir=$1 req=$2
  if [ ! -x "$dir/bin/python" ] || ! cmp -s "$req" "$dir/.requirements"; then
    rm -rf "$dir"
    /usr/bin/python3 -m venv "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check -r "$req" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; } >&2
    cp "$req" "$dir/.requirements"
  fi
  echo "$dir"
}
