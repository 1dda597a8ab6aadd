#!/usr/bin/env bash
# Release checks of kubenode.gc, as root on Debian 12 (called by `bash scripts/test.sh release`):
#   changelog  antsibull-changelog lint; CHANGELOG.md is what changelogs/ generates
#   ee         execution environment: the collection's meta/execution-environment.yml resolves to
#              requirements.txt and bindep.txt (ansible-builder introspect), and
#              `ansible-builder create` accepts tests/ee/execution-environment.yml
#   importer   galaxy-importer (Galaxy's and Automation Hub's upload checks) accepts the tarball
#   docs       antsibull-docs lint-collection-docs --plugin-docs; the docs site builds as HTML;
#              headless Chromium renders the image_gc module page and an audit report.html
#              (tests/release/test_docsite.py)
# The tools live in their own venvs under .cache/ (tests/release/requirements*.txt); the docs site
# and the screenshots are kept in tests/output/docsite/.
#
# Usage: bash scripts/release-checks.sh [changelog|ee|importer|docs ...]   (default: all)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${KUBENODE_GC_VENV:-$ROOT/.venv}
CACHE=$ROOT/.cache
OUT=$ROOT/tests/output
cd "$ROOT"

CHECKS=("$@")
[ "${#CHECKS[@]}" -gt 0 ] || CHECKS=(changelog ee importer docs)

# shellcheck source=scripts/tool-venv.sh
. "$ROOT/scripts/tool-venv.sh"

WORK=$(mktemp -d /tmp/kubenode-gc-release.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
TARBALL=""
COLLECTIONS=$WORK/collections
tarball() {  # build the collection once, and install it into $COLLECTIONS
  [ -n "$TARBALL" ] && return 0
  TARBALL=$("$VENV/bin/ansible-galaxy" collection build --force --output-path "$WORK" . | sed -n 's/^Created collection for .* at //p')
  ANSIBLE_COLLECTIONS_PATH=$COLLECTIONS "$VENV/bin/ansible-galaxy" collection install --offline -p "$COLLECTIONS" "$TARBALL" >/dev/null
}

check_changelog() {
  local tools=$1
  "$tools/bin/antsibull-changelog" lint
  # generate into a copy, so a stale CHANGELOG.md is reported instead of rewritten
  "$tools/bin/antsibull-changelog" generate --output "$WORK/CHANGELOG.md" --output-format md
  if ! diff -u CHANGELOG.md "$WORK/CHANGELOG.md"; then
    echo "CHANGELOG.md is not what changelogs/ generates: run antsibull-changelog generate (docs/development.md)." >&2
    return 1
  fi
  echo "changelog: lint clean, CHANGELOG.md up to date"
}

check_ee() {
  local tools=$1 deps
  tarball
  deps=$("$tools/bin/ansible-builder" introspect --sanitize "$COLLECTIONS")
  echo "$deps"
  local want
  for want in grpcio protobuf ruamel.yaml tomlkit openssh-client; do
    grep -q "^- '${want}[ >=\[]" <<<"$deps" || { echo "ee: ansible-builder does not see $want in the collection's EE metadata" >&2; return 1; }
  done
  "$tools/bin/ansible-builder" create -f tests/ee/execution-environment.yml -c "$WORK/ee-context" --output-filename Containerfile -v 1
  grep -q "ansible-galaxy collection install" "$WORK/ee-context/Containerfile"
  echo "ee: metadata resolves, ansible-builder create accepts tests/ee/execution-environment.yml"
}

check_importer() {
  local importer
  importer=$(tool_venv "$CACHE/galaxy-importer" tests/release/requirements-importer.txt)
  tarball
  # galaxy-importer runs ansible-doc and ansible-lint from its own venv
  (cd "$WORK" && PATH="$importer/bin:$PATH" GALAXY_IMPORTER_CONFIG="$ROOT/tests/release/galaxy-importer.cfg" \
    "$importer/bin/python" -m galaxy_importer.main "$TARBALL" >"$WORK/importer.log" 2>&1) || {
    grep -v '^Loading ' "$WORK/importer.log" >&2
    echo "importer: galaxy-importer rejected the tarball" >&2
    return 1
  }
  # it exits 0 with linter warnings: the tarball must come through without any
  if grep -E -i '^(WARNING|ERROR)|: [a-z-]+\[[a-z-]+\]' "$WORK/importer.log"; then
    echo "importer: galaxy-importer reported the lines above" >&2
    return 1
  fi
  echo "importer: galaxy-importer accepts $(basename "$TARBALL")"
}

check_docs() {
  local tools=$1 site=$OUT/docsite
  tarball
  local installed=$COLLECTIONS/ansible_collections/kubenode/gc
  # antsibull-docs runs ansible-doc and ansible of its own venv
  export ANSIBLE_COLLECTIONS_PATH=$COLLECTIONS PATH="$tools/bin:$PATH"
  # the playbooks document their variables in their first comment lines: show them on the site
  local playbook
  for playbook in playbooks/*.yml; do
    # shellcheck disable=SC2016  # RST literal markup, not command substitution
    printf '\n``kubenode.gc.%s`` variables\n%s\n\n.. code-block:: text\n\n' "$(basename "$playbook" .yml)" "$(printf '%.0s-' {1..60})"
    sed -n '2,/^[^#]/p' "$playbook" | grep '^#' | sed 's/^# \{0,1\}/    /'
  done >>"$installed/docs/docsite/rst/playbooks.rst"
  "$tools/bin/antsibull-docs" lint-collection-docs --plugin-docs "$installed"
  rm -rf "$site"
  mkdir -p "$site/src"
  chmod 0755 "$site/src"  # sphinx-init wants a directory only its owner can write
  "$tools/bin/antsibull-docs" sphinx-init --use-current --squash-hierarchy --fail-on-error --lenient \
    --title kubenode.gc --project kubenode.gc --dest-dir "$site/src" kubenode.gc
  # offline: no intersphinx inventories to download
  echo 'intersphinx_mapping = {}' >>"$site/src/conf.py"
  bash "$site/src/build.sh" >"$site/build.log" 2>&1 || {
    tail -40 "$site/build.log" >&2
    return 1
  }
  mv "$site/src/build/html" "$site/html"
  # offline, links into the Ansible docs (ansible.builtin, common return values, configuration)
  # cannot resolve; any other Sphinx warning fails the check
  if grep 'WARNING' "$site/build.log" | grep -v -E "undefined label: '(ansible_collections\.ansible\.builtin\.[a-z_]+|common_return_values|ansible_configuration_settings|callback_plugins|[a-z_]+_plugins)'|'envvar' reference target not found: ANSIBLE_"; then
    echo "docs: Sphinx warnings above" >&2
    return 1
  fi
  echo "docs: site built in $site/html ($(find "$site/html" -name '*.html' | wc -l) pages)"
  KUBENODE_GC_DOCSITE=$site/html KUBENODE_GC_ARTIFACTS=$site \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rA tests/release/test_docsite.py
}

tools=""
for check in "${CHECKS[@]}"; do
  case $check in
    changelog | ee | docs) [ -n "$tools" ] || tools=$(tool_venv "$CACHE/release-tools" tests/release/requirements.txt) ;;
    importer) ;;
    *) echo "release-checks.sh: unknown check $check (changelog, ee, importer, docs)" >&2; exit 2 ;;
  esac
  printf '\n---- release check: %s\n' "$check"
  "check_$check" "$tools"
done
