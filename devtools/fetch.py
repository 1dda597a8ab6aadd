# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the runtimes of the test matrix come from, fetched into a cache when missing.

* containerd 1.6: Debian 12's ``containerd`` package (scripts/setup.sh installs it);
* containerd 1.7 and 2.1: Debian trixie's and sid's ``containerd`` packages, fetched with a
  private apt configuration (own sources list naming the Debian archive the host's own apt
  sources name, with suite trixie/sid, own state and cache directories, an empty dpkg status)
  by ``apt-get download`` and unpacked with ``dpkg -x`` into
  ``.cache/runtimes/containerd-<version>/``.  The host's apt sources, lists and caches are
  never touched.  Their binaries run on Debian 12;
* containerd 2.2 and 2.3 (no Debian package): prebuilt ``containerd``, ``ctr`` and
  ``containerd-shim-runc-v2`` in ``containerd-2.2/`` and ``containerd-2.3/`` of the shared
  runtimes directory (``$KUBENODE_GC_SHARED_RUNTIMES``, by default ``../shared/runtimes``
  next to this checkout);
* cri-o: prebuilt binaries in ``$KUBENODE_GC_CRIO_DIR``, by default the shared runtimes
  directory (conmon, runc and skopeo come from Debian 12's packages);
* cri-dockerd: the prebuilt ``cri-dockerd`` of the shared runtimes directory, in front of Debian 12's
  ``docker.io`` (dockerd 20.10).

``python -m devtools.fetch`` fetches every containerd build that is missing (the set-up
command runs it) and prints what the matrix will use.
"""

import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from .collection import REPO

CACHE = os.environ.get("KUBENODE_GC_RUNTIME_CACHE") or os.path.join(REPO, ".cache", "runtimes")
CRIO_DIR_ENV = "KUBENODE_GC_CRIO_DIR"
SHARED_RUNTIMES_ENV = "KUBENODE_GC_SHARED_RUNTIMES"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# release line -> Debian suite whose containerd package is that line
CONTAINERD_SUITES = {"1.7": "trixie", "2.1": "sid"}
# release lines with no Debian package: prebuilt in the shared runtimes directory, <dir>/containerd-<line>/
CONTAINERD_PREBUILT = ("2.2", "2.3")


def shared_runtimes_dir():
    """The directory of prebuilt runtimes: $KUBENODE_GC_SHARED_RUNTIMES, else ../shared/runtimes next to the checkout."""
    return os.environ.get(SHARED_RUNTIMES_ENV) or os.path.join(os.path.dirname(REPO), "shared", "runtimes")


def crio_search_dir():
    """Where cri-o's binaries are looked for: $KUBENODE_GC_CRIO_DIR, else the shared runtimes directory."""
    return os.environ.get(CRIO_DIR_ENV) or shared_runtimes_dir()


def crio_dir():
    """The directory with cri-o's ``crio`` and ``pinns`` binaries, or None when there is none."""
    path = crio_search_dir()
    if all(os.access(os.path.join(path, b), os.X_OK) for b in ("crio", "pinns")):
        return os.path.realpath(path)
    return None


def cri_dockerd_binary():
    """The prebuilt cri-dockerd of the shared runtimes directory when it is there and Debian's dockerd is installed, else None."""
    path = os.path.join(shared_runtimes_dir(), "cri-dockerd")
    if os.access(path, os.X_OK) and os.access("/usr/sbin/dockerd", os.X_OK):
        return os.path.realpath(path)
    return None


class NoMirror(RuntimeError):
    """The host's apt sources name no Debian archive."""


def host_mirror(paths=None):
    """(URI, keyring) of the host's Debian archive (not -security), as its apt sources name it; NoMirror when none does."""
    paths = paths or sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    key, sep, value = line.partition(":")
                    if sep and not line.startswith((" ", "\t", "#")):
                        fields[key.strip().lower()] = value.strip()
                suites = fields.get("suites", "").split()
                if fields.get("types", "deb").split()[0] == "deb" and any(not s.endswith("-security") for s in suites) and "debian" in fields.get("uris", ""):
                    if "-security" not in fields.get("uris", ""):
                        return fields["uris"].split()[0], fields.get("signed-by") or DEFAULT_KEYRING
        else:
            for line in text.splitlines():
                m = re.match(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and "debian" in m.group(2) and "security" not in m.group(2) and not m.group(3).endswith("-security"):
                    keyring = re.search(r"signed-by=(\S+)", m.group(1) or "")
                    return m.group(2), keyring.group(1) if keyring else DEFAULT_KEYRING
    raise NoMirror("the host's apt sources (%s) name no Debian archive to fetch containerd from: add one, or set %s to a "
                   "directory holding the runtimes" % (", ".join(paths), SHARED_RUNTIMES_ENV))


def upstream_version(debian_version):
    """'1.7.24~ds1-6+deb13u1' -> '1.7.24'; '1:2.1.9+ds1-5' -> '2.1.9'."""
    version = debian_version.split(":", 1)[-1]
    return re.split(r"[~+-]", version, maxsplit=1)[0]


def _cached(line):
    found = []
    for path in glob.glob(os.path.join(CACHE, "containerd-%s.*" % line)):
        if os.path.exists(os.path.join(path, ".complete")):
            version = os.path.basename(path)[len("containerd-"):]
            found.append((tuple(int(p) for p in version.split(".") if p.isdigit()), path))
    return max(found)[1] if found else None


def _apt(workdir, *args):
    opts = [
        "-o", "Dir::Etc::SourceList=%s/sources.list" % workdir,
        "-o", "Dir::Etc::SourceParts=%s/sources.list.d" % workdir,
        "-o", "Dir::Etc::Preferences=%s/preferences" % workdir,
        "-o", "Dir::Etc::PreferencesParts=%s/preferences.d" % workdir,
        "-o", "Dir::State=%s/state" % workdir,
        "-o", "Dir::State::status=%s/state/status" % workdir,
        "-o", "Dir::Cache=%s/cache" % workdir,
        "-o", "APT::Sandbox::User=root",
        "-o", "Debug::NoLocking=1",
        "-qq",
    ]
    out = subprocess.run(["apt-get"] + opts + list(args), cwd=os.path.join(workdir, "debs"), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("apt-get %s (private config in %s) failed (%d): %s" % (" ".join(args), workdir, out.returncode, out.stderr.strip()))
    return out.stdout


def fetch_containerd(line, log=sys.stderr):
    """Download Debian's containerd package of ``line`` (see CONTAINERD_SUITES) and unpack it into the cache."""
    suite = CONTAINERD_SUITES[line]
    mirror, keyring = host_mirror()
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="apt-%s-" % suite, dir=CACHE)
    try:
        for d in ("sources.list.d", "preferences.d", "state/lists/partial", "cache/archives/partial", "debs"):
            os.makedirs(os.path.join(work, d))
        open(os.path.join(work, "state", "status"), "w", encoding="utf-8").close()
        with open(os.path.join(work, "sources.list"), "w", encoding="utf-8") as f:
            f.write("deb [signed-by=%s] %s %s main\n" % (keyring, mirror, suite))
        log.write("fetching containerd from Debian %s (%s)\n" % (suite, mirror))
        _apt(work, "update")
        _apt(work, "download", "containerd")
        (deb,) = glob.glob(os.path.join(work, "debs", "containerd_*.deb"))
        debian_version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True, check=True).stdout.strip()
        version = upstream_version(debian_version)
        if not (version == line or version.startswith(line + ".")):
            raise RuntimeError("Debian %s's containerd is %s, not a %s release" % (suite, debian_version, line))
        dest = os.path.join(CACHE, "containerd-%s" % version)
        unpacked = os.path.join(work, "root")
        subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(os.path.join(unpacked, "usr", "bin"), dest)
        with open(os.path.join(dest, ".complete"), "w", encoding="utf-8") as f:
            f.write("containerd %s from Debian %s (%s)\n" % (debian_version, suite, mirror))
        return dest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prebuilt_containerd_dir(line):
    """<shared runtimes>/containerd-<line> when it holds containerd, ctr and the runc shim, else None."""
    path = os.path.join(shared_runtimes_dir(), "containerd-%s" % line)
    if all(os.access(os.path.join(path, b), os.X_OK) for b in ("containerd", "ctr", "containerd-shim-runc-v2")):
        return os.path.realpath(path)
    return None


def containerd_bin_dir(line, fetch=True):
    """Directory with containerd, ctr and the runc shim of ``line``; None means Debian 12's own (on PATH), or, for a
    prebuilt line, that the shared runtimes directory does not hold it."""
    if line == "1.6":
        return None
    if line in CONTAINERD_PREBUILT:
        return prebuilt_containerd_dir(line)
    found = _cached(line)
    if found or not fetch:
        return found
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test workers may want it at once
        return _cached(line) or fetch_containerd(line)


def main(argv=None):
    """Fetch the runtimes named in ``argv`` (containerd-1.7, containerd-2.1; the others need no fetch), every one without
    arguments (scripts/setup.sh for the tests; the demo names only the runtime it runs), and say where each comes from;
    ``--mirror`` alone prints the host's Debian archive instead."""
    names = sys.argv[1:] if argv is None else argv
    if names == ["--mirror"]:  # the Debian archive the host's apt sources name (debootstrap in the build scripts)
        try:
            print(host_mirror()[0])
        except NoMirror as exc:
            print(str(exc), file=sys.stderr)
            return 1
        return 0
    known = ["containerd-1.6"] + ["containerd-" + line for line in list(CONTAINERD_SUITES) + list(CONTAINERD_PREBUILT)] + ["crio", "cri-dockerd"]
    unknown = [n for n in names if n not in known]
    if unknown:
        print("unknown runtime %s (one of %s)" % (unknown[0], ", ".join(known)), file=sys.stderr)
        return 2
    try:
        for line in CONTAINERD_SUITES:
            if not names or "containerd-" + line in names:
                print("containerd %-4s %s" % (line, containerd_bin_dir(line)))
    except NoMirror as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for line in CONTAINERD_PREBUILT:
        if not names or "containerd-" + line in names:
            found = containerd_bin_dir(line) or "NOT FOUND in %s: containerd %s will not be tested" % (shared_runtimes_dir(), line)
            print("containerd %-4s %s" % (line, found))
    if not names or "crio" in names:
        found = crio_dir()
        print("cri-o          %s" % (found or "NOT FOUND (set %s or provide ../shared/runtimes): cri-o will not be tested" % CRIO_DIR_ENV))
    if not names or "cri-dockerd" in names:
        found = cri_dockerd_binary()
        print("cri-dockerd    %s" % (found or "NOT FOUND (cri-dockerd in %s and Debian's docker.io): cri-dockerd will not be tested" % shared_runtimes_dir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
