# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What root executes is root's: the gc_timer role's check of the interpreter, its sys.path, the runner's code and its
configuration, on a real tree of files, links and directories (owners made with chown: the tests run as root) that the
check runs chrooted into, so its paths are those of a node; the role's packing of it, run for real; and the unit's
sandbox against the lock directory and systemd-analyze security.

The walk and the rule are _files' (chase with ``strict``, ``problem``): the sentences are the modules' (``owned by uid
4242, not root``; ``writable by its group (mode 0775)``), in the check's own frame."""

import io
import json
import os
import re
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml

from devtools.collection import make_importable
from ansible_collections.kubenode.gc.plugins.module_utils import _files
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _timer_trust as trust
from tests.unit.plugins.module_utils.test__timer import ROLE, closure

WHY = "root runs it in the timer's service, so it and every directory above it must be owned by root and writable by root alone."
USER = 4242  # no such user: the sentence gives the uid alone
CODE, CONFIG = "/usr/local/lib/kubenode-gc", "/etc/kubenode-gc/gc-timer.json"


class Tree:
    """A real file system below ``root`` (root's, 0755), the check's / when it runs chrooted: path -> (kind, mode, uid,
    link target or file lines); directories on the way are made root's, 0755."""

    def __init__(self, root, entries):
        self.root = str(root)
        os.mkdir(self.root, 0o755)
        os.chmod(self.root, 0o755)
        owners = []
        for path, (kind, mode, uid, data) in ((p, spec + (None, 0, None)[len(spec) - 1:]) for p, spec in entries.items()):
            real = self.root + path
            self.directory(os.path.dirname(path))
            if kind == "d":
                self.directory(path)
            elif kind == "f":
                with open(real, "w") as f:
                    f.write("".join(line + "\n" for line in data or []))
            else:
                os.symlink(data, real)
            owners.append((real, kind, 0o755 if mode is None and kind == "d" else 0o644 if mode is None else mode, uid))
        for real, kind, mode, uid in owners:  # after every entry is made: a directory's mode and owner as asked
            os.chown(real, uid, uid, follow_symlinks=False)
            if kind != "l":
                os.chmod(real, mode)

    def directory(self, path):
        if not os.path.isdir(self.root + path):
            self.directory(os.path.dirname(path))
            os.mkdir(self.root + path)
            os.chmod(self.root + path, 0o755)


# trust.check, run chrooted into a Tree by a child (chroot needs root; the tests run as root): the interpreter's answers
# come from ``answers`` (-I -S gives "bare", -I "site") or it fails with ``fail`` on stderr; the calls it got are returned
CHROOTED = """
import io, json, os, pwd, subprocess, sys
sys.path[:0] = json.loads(sys.argv[3])
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _timer_trust as trust
spec, calls = json.loads(sys.argv[2]), []

def run(argv, **kwargs):
    calls.append(argv)
    assert kwargs["env"] == {} and kwargs["cwd"] == "/"
    if spec["fail"]:
        return subprocess.CompletedProcess(argv, 1, b"", spec["fail"].encode())
    return subprocess.CompletedProcess(argv, 0, json.dumps(spec["answers"]["bare" if "-S" in argv else "site"]).encode(), b"")

os.chroot(sys.argv[1])
os.chdir("/")
if spec["main"]:
    printed = io.StringIO()
    out = {"rc": trust.main(spec["main"], printed), "stdout": printed.getvalue()}
else:
    try:
        out = {"result": trust.check(*spec["args"], writable=spec["writable"], run=run)}
    except trust.UntrustedError as exc:
        out = {"error": str(exc)}
out["calls"] = calls
print(json.dumps(out))
"""


class Python:
    """The interpreter's answers: -I -S gives ``bare`` (sys.path, site directories), -I the path with .pth lines read;
    ``fail``: its stderr, exit status 1. ``calls``: what the check ran, after a check."""

    def __init__(self, path, sites, full=None, fail=None):
        self.answers = {"bare": {"path": path, "site": sites}, "site": {"path": full if full is not None else path + sites, "site": sites}}
        self.fail = fail
        self.calls = []


@pytest.fixture
def tree(tmp_path):
    """make(entries) builds a Tree; check(python, run, writable) runs trust.check chrooted into it."""
    made = {}

    def make(entries):
        made["tree"] = Tree(tmp_path / "root", entries)
        return made["tree"]

    def chrooted(run, args=(), main=None, writable=None):
        spec = dict(args=list(args), writable=writable or {}, main=main, answers=run.answers, fail=run.fail)
        proc = subprocess.run([sys.executable, "-c", CHROOTED, made["tree"].root, json.dumps(spec), json.dumps([make_importable()])],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        run.calls = out["calls"]
        return out

    make.chrooted = chrooted
    make.check = lambda python, run, writable=None: chrooted(run, (python, CODE, CONFIG), writable=writable)
    return make


SYSTEM = {
    "/usr/bin/python3": ("l", None, 0, "python3.11"),
    "/usr/bin/python3.11": ("f", 0o755),
    "/usr/lib/python3.11/os.py": ("f",),
    "/usr/lib/python3.11/lib-dynload": ("d",),
    "/usr/lib/python3/dist-packages/grpc/__init__.py": ("f",),
}
SYS_PATH = ["/usr/lib/python311.zip", "/usr/lib/python3.11", "/usr/lib/python3.11/lib-dynload"]
SITES = ["/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages"]


def passed(tree, python, run):
    out = tree.check(python, run)
    assert "result" in out, out
    return out["result"]


def refused(tree, python, run, writable=None):
    out = tree.check(python, run, writable)
    assert "error" in out, out
    return out["error"]


def test_a_system_interpreter_root_owns_passes_and_its_existing_sys_path_is_listed(tree):
    tree(SYSTEM)
    run = Python(SYS_PATH, SITES)
    result = passed(tree, "/usr/bin/python3", run)
    assert result["python"] == "/usr/bin/python3.11"
    assert result["sys_path"] == ["/usr/lib/python3.11", "/usr/lib/python3.11/lib-dynload", "/usr/lib/python3/dist-packages"]
    # first without site (no .pth file runs), then as the service runs it; never with the user's environment
    assert [c[:3] for c in run.calls] == [["/usr/bin/python3", "-I", "-S"], ["/usr/bin/python3", "-I", "-c"]]


@pytest.mark.parametrize("entries, python, sentence", [
    ({"/opt/py/python3": ("f", 0o755, USER)}, "/opt/py/python3", "gc_timer_python /opt/py/python3 is owned by uid %d, not root: " % USER),
    ({"/opt/py": ("d", 0o755, USER), "/opt/py/bin/python3": ("f", 0o755)}, "/opt/py/bin/python3",
     "gc_timer_python /opt/py/bin/python3 goes through /opt/py, which is owned by uid %d, not root: " % USER),
    ({"/opt/py": ("d", 0o775), "/opt/py/python3": ("f", 0o755)}, "/opt/py/python3",
     "gc_timer_python /opt/py/python3 goes through /opt/py, which is writable by its group (mode 0775): "),
    ({"/opt/py": ("d", 0o1777), "/opt/py/python3": ("f", 0o755)}, "/opt/py/python3",
     "gc_timer_python /opt/py/python3 goes through /opt/py, which is writable by its group and others (mode 1777): "),
    ({"/opt/py/python3": ("f", 0o757)}, "/opt/py/python3", "gc_timer_python /opt/py/python3 is writable by others (mode 0757): "),
    # a root link to another user's file, an absolute and a relative one
    ({"/usr/local/bin/py": ("l", None, 0, "/home/u/py"), "/home/u": ("d", 0o755, USER), "/home/u/py": ("f", 0o755)}, "/usr/local/bin/py",
     "gc_timer_python /usr/local/bin/py goes through /home/u, which is owned by uid %d, not root: " % USER),
    ({"/opt/py/python3": ("l", None, 0, "../mine/python3"), "/opt/mine/python3": ("f", 0o755, USER)}, "/opt/py/python3",
     "gc_timer_python /opt/py/python3 goes through /opt/mine/python3, which is owned by uid %d, not root: " % USER),
    # a link another user owns, even to a root file
    ({"/opt/py/python3": ("l", None, USER, "/usr/bin/python3.11")}, "/opt/py/python3",
     "gc_timer_python /opt/py/python3 is owned by uid %d, not root: " % USER),
    # ".." after a link is the parent of where the link led, not of the link
    ({"/opt/py/bin": ("l", None, 0, "/srv/x/bin"), "/srv/x": ("d", 0o755, USER), "/srv/x/bin/python3": ("f", 0o755)}, "/opt/py/bin/../bin/python3",
     "gc_timer_python /opt/py/bin/../bin/python3 goes through /srv/x, which is owned by uid %d, not root: " % USER),
])
def test_an_interpreter_that_is_not_root_s_alone_is_refused_before_it_runs(tree, entries, python, sentence):
    tree(dict(SYSTEM, **entries))
    run = Python(SYS_PATH, SITES)
    assert refused(tree, python, run) == sentence + WHY
    assert run.calls == []  # never run: running it is what the check guards


def test_a_link_loop_is_one_sentence(tree):
    tree(dict(SYSTEM, **{"/opt/a": ("l", None, 0, "/opt/b"), "/opt/b": ("l", None, 0, "/opt/a")}))
    assert refused(tree, "/opt/a", Python(SYS_PATH, SITES)) == "gc_timer_python /opt/a goes through more than %d symbolic links." % _files.MAX_LINKS


def test_a_missing_interpreter_is_left_to_the_role_s_library_check(tree):
    tree(SYSTEM)
    run = Python(SYS_PATH, SITES)
    assert passed(tree, "/opt/none/python3", run) == dict(python=None, sys_path=[], checked=1)
    assert run.calls == []


VENV = dict(SYSTEM, **{
    "/opt/kubenode-gc/venv/bin/python": ("l", None, 0, "python3"),
    "/opt/kubenode-gc/venv/bin/python3": ("l", None, 0, "/usr/bin/python3"),
    "/opt/kubenode-gc/venv/pyvenv.cfg": ("f", 0o644, 0, ["home = /usr/bin", "include-system-site-packages = false"]),
    "/opt/kubenode-gc/venv/lib/python3.11/site-packages/grpc/__init__.py": ("f",),
    "/opt/kubenode-gc/venv/lib/python3.11/site-packages/extra.pth": ("f", 0o644, 0, ["# comment", "../extra", "import os"]),
    "/opt/kubenode-gc/venv/lib/python3.11/extra/mod.py": ("f",),
})
VENV_SITE = "/opt/kubenode-gc/venv/lib/python3.11/site-packages"


def test_a_venv_is_checked_with_its_pyvenv_cfg_site_packages_and_the_directories_its_pth_files_add(tree):
    tree(VENV)
    run = Python(SYS_PATH, [VENV_SITE], full=SYS_PATH + [VENV_SITE, VENV_SITE + "/../extra"])
    result = passed(tree, "/opt/kubenode-gc/venv/bin/python", run)
    assert result["python"] == "/usr/bin/python3.11"
    assert result["sys_path"] == ["/usr/lib/python3.11", "/usr/lib/python3.11/lib-dynload", VENV_SITE, VENV_SITE + "/../extra"]
    assert [c[0] for c in run.calls] == ["/opt/kubenode-gc/venv/bin/python"] * 2  # the venv's path: Python finds pyvenv.cfg from it
    assert run.calls[0][-1] == "/opt/kubenode-gc/venv"  # its site directories asked for by prefix, not through site.venv()


def test_the_bare_query_reads_no_pth_file_of_a_real_venv(tmp_path):
    """site.venv() and site.main() run the .pth files: the -I -S query names the venv's site directory without them."""
    subprocess.run([sys.executable, "-I", "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    site = subprocess.run([python, "-I", "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    marker = tmp_path / "pth-ran"
    with open(os.path.join(site, "kgc.pth"), "w") as f:
        f.write("import os; open(%r, 'w').close()\n" % str(marker))
    paths, sites = trust._query(python, False, subprocess.run, [str(tmp_path / "venv")])
    assert site in sites and not marker.exists()
    # as the service runs it, site reads the .pth file: which is why its directory is checked first
    trust._query(python, True, subprocess.run)
    assert marker.exists()


@pytest.mark.parametrize("change, sentence, runs", [
    ({"/opt/kubenode-gc/venv/pyvenv.cfg": ("f", 0o666, 0, ["home = /usr/bin"])},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's /opt/kubenode-gc/venv/pyvenv.cfg is writable by its group and others (mode 0666): ", 0),
    ({"/opt/kubenode-gc/venv/pyvenv.cfg": ("f", 0o644, 0, ["home = /opt/other/bin"]), "/opt/other": ("d", 0o755, USER),
      "/opt/other/bin/python3": ("f", 0o755)},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's venv home /opt/other/bin goes through /opt/other, which is owned by uid %d, not root: " % USER, 0),
    ({"/usr/lib/python3.11": ("d", 0o755, USER)},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's library directory /usr/lib/python3.11 is owned by uid %d, not root: " % USER, 0),
    ({VENV_SITE: ("d", 0o755, USER)},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's sys.path directory %s is owned by uid %d, not root: " % (VENV_SITE, USER), 1),
    ({VENV_SITE + "/extra.pth": ("f", 0o644, USER, ["import os; os.system('id')"])},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's %s/extra.pth is owned by uid %d, not root: " % (VENV_SITE, USER), 1),
    ({"/opt/kubenode-gc/venv/lib/python3.11/extra": ("d", 0o777)},
     "gc_timer_python /opt/kubenode-gc/venv/bin/python's sys.path directory %s/../extra goes through /opt/kubenode-gc/venv/lib/python3.11/extra, "
     "which is writable by its group and others (mode 0777): " % VENV_SITE, 1),
])
def test_what_the_interpreter_reads_must_be_root_s_alone_and_no_pth_file_runs_before_it_passed(tree, change, sentence, runs):
    tree(dict(VENV, **change))
    run = Python(SYS_PATH, [VENV_SITE], full=SYS_PATH + [VENV_SITE, VENV_SITE + "/../extra"])
    assert refused(tree, "/opt/kubenode-gc/venv/bin/python", run) == sentence + WHY
    # the interpreter runs (-I -S: no .pth file) only once its own files passed, and with site only once everything it reads did
    assert len(run.calls) == runs and all("-S" in c for c in run.calls)


def test_a_directory_only_a_pth_import_line_adds_is_checked_from_the_interpreter_s_own_word(tree):
    tree(dict(VENV, **{"/srv/plugins": ("d", 0o755, USER)}))
    run = Python(SYS_PATH, [VENV_SITE], full=SYS_PATH + [VENV_SITE, VENV_SITE + "/../extra", "/srv/plugins"])
    assert refused(tree, "/opt/kubenode-gc/venv/bin/python", run) == (
        "gc_timer_python /opt/kubenode-gc/venv/bin/python's sys.path directory /srv/plugins is owned by uid %d, not root: %s" % (USER, WHY))
    assert len(run.calls) == 2


@pytest.mark.parametrize("entries, sentence", [
    ({CODE + "/kubenode-gc-timer": ("f", 0o644, USER)},
     "The runner's code %s holds %s/kubenode-gc-timer, which is owned by uid %d, not root: " % (CODE, CODE, USER)),
    ({CODE + "/ansible_collections/kubenode/gc/plugins/module_utils/gc/_timer.py": ("f", 0o664)},
     "The runner's code %s holds %s/ansible_collections/kubenode/gc/plugins/module_utils/gc/_timer.py, which is writable by its group "
     "(mode 0664): " % (CODE, CODE)),
    ({CODE + "/ansible_collections/kubenode/gc/plugins/module_utils/gc": ("l", None, USER, "/srv/gc")},
     "The runner's code %s holds %s/ansible_collections/kubenode/gc/plugins/module_utils/gc, which is owned by uid %d, not root: " % (CODE, CODE, USER)),
    ({CODE: ("d", 0o2775)}, "The runner's code %s is writable by its group (mode 2775): " % CODE),
    ({CONFIG: ("f", 0o644, USER)},
     "The runner's configuration directory /etc/kubenode-gc holds %s, which is owned by uid %d, not root: " % (CONFIG, USER)),
])
def test_the_runner_s_code_and_configuration_must_be_root_s_alone(tree, entries, sentence):
    runner = {CODE + "/kubenode-gc-timer": ("f",), CODE + "/ansible_collections/kubenode/gc/plugins/module_utils/gc/_timer.py": ("f",),
              CONFIG: ("f", 0o644)}
    links = [path for path, spec in entries.items() if spec[0] == "l"]  # a directory made a link has nothing below it
    tree({**SYSTEM, **{p: spec for p, spec in runner.items() if not any(p.startswith(link + "/") for link in links)}, **entries})
    assert refused(tree, "/usr/bin/python3", Python(SYS_PATH, SITES)) == sentence + WHY


def test_runner_paths_that_do_not_exist_yet_pass_when_their_existing_parents_are_root_s(tree):
    tree(SYSTEM)
    assert passed(tree, "/usr/bin/python3", Python(SYS_PATH, SITES))["python"] == "/usr/bin/python3.11"  # CODE and CONFIG do not exist


@pytest.mark.parametrize("writable, python, sentence", [
    ({"gc_timer_ledger_path": "/tmp/kgc/image-ledger.json"}, "/usr/bin/python3",
     "gc_timer_ledger_path /tmp/kgc/image-ledger.json is in /tmp, which the timer's service cannot write (its sandbox hides "
     "/home, /root, /run/user, /tmp, /var/tmp)."),
    ({"The kubelet's podLogsDir": "/home/logs"}, "/usr/bin/python3",
     "The kubelet's podLogsDir /home/logs is in /home, which the timer's service cannot write (its sandbox hides /home, /root, /run/user, /tmp, "
     "/var/tmp)."),
    ({}, "/root/venv/bin/python",
     "gc_timer_python /root/venv/bin/python is in /root, which the timer's service cannot see (its sandbox hides /home, /root, /run/user, /tmp, "
     "/var/tmp): install the interpreter elsewhere, such as kubenode.gc.node_prereqs' /opt/kubenode-gc/venv."),
])
def test_paths_the_sandbox_hides_are_refused(tree, writable, python, sentence):
    tree(dict(SYSTEM, **{"/root": ("d", 0o700), "/root/venv/bin/python": ("f", 0o755)}))
    assert refused(tree, python, Python(SYS_PATH, SITES), writable) == sentence
    assert trust.hidden("/var/tmpx/y") is None and trust.hidden("/tmp") == "/tmp"


def test_an_interpreter_that_cannot_say_its_sys_path_is_one_sentence(tree):
    tree(SYSTEM)
    broken = Python(SYS_PATH, SITES, fail="Traceback...\nModuleNotFoundError: No module named 'encodings'\n")
    assert refused(tree, "/usr/bin/python3", broken) == ("gc_timer_python /usr/bin/python3 could not say its sys.path (/usr/bin/python3 -I -c): "
                                                         "ModuleNotFoundError: No module named 'encodings'")


def test_main_prints_one_json_line_and_exits_1_with_the_sentence(tree):
    python = os.path.realpath(shutil.which("python3", path="/usr/bin:/bin") or sys.executable)  # this machine's, run for real
    out = io.StringIO()
    assert trust.main([python, "/nonexistent-kgc/lib", "/nonexistent-kgc/etc/gc-timer.json",
                       "gc_timer_ledger_path=/var/lib/kubenode-gc/image-ledger.json"], out) == 0
    assert json.loads(out.getvalue())["python"] == python
    tree(dict(SYSTEM, **{"/opt/py/python3": ("f", 0o755, USER)}))
    out = tree.chrooted(Python(SYS_PATH, SITES), main=["/opt/py/python3", CODE, CONFIG])
    assert out["rc"] == 1 and out["calls"] == []
    assert json.loads(out["stdout"]) == {"failed": True, "msg": "gc_timer_python /opt/py/python3 is owned by uid %d, not root: %s" % (USER, WHY)}
    assert trust.main(["/usr/bin/python3"], io.StringIO()) == 2


def role_vars():
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        return yaml.safe_load(f)


def test_the_role_packs_exactly_the_check_s_import_closure():
    assert role_vars()["__gc_timer_trust_module_utils"] == closure("gc._timer_trust")


def test_the_role_s_zip_application_runs_the_check_on_the_real_file_system(tmp_path):
    """Built with the role's own packing script, run as the role runs it (python -I trust.pyz ...), on this machine."""
    with open(os.path.join(ROLE, "tasks", "present.yml")) as f:
        tasks = yaml.safe_load(f)
    script = [t for block in tasks for t in block.get("block", []) if "__gc_timer_pack_trust" in t.get("vars", {})][0]["vars"]["__gc_timer_pack_trust"]
    pyz = tmp_path / "trust.pyz"
    subprocess.run([sys.executable, "-c", script, ROLE, str(pyz)] + role_vars()["__gc_timer_trust_module_utils"], check=True)
    python = os.path.realpath(shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
    ok = subprocess.run([sys.executable, "-I", str(pyz), python, "/nonexistent-kgc/lib", "/nonexistent-kgc/etc/gc-timer.json"],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout)["python"] == python, ok.stdout + ok.stderr
    # tmp_path is below /tmp (mode 1777): an interpreter there is refused, and never run
    shutil.copy(python, tmp_path / "python3")
    bad = subprocess.run([sys.executable, "-I", str(pyz), str(tmp_path / "python3"), "/nonexistent-kgc/lib", "/nonexistent-kgc/etc/gc-timer.json"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and json.loads(bad.stdout)["msg"].startswith("gc_timer_python %s goes through " % (tmp_path / "python3")), bad.stdout


def unit(**overrides):
    """The role's service unit rendered with the role's defaults (and the pod log directory the role would choose)."""
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        values = yaml.safe_load(f)
    values.update(role_vars(), ansible_managed="Ansible managed", __gc_timer_pod_logs_dir="/var/log/pods", **overrides)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["dirname"] = os.path.dirname
    with open(os.path.join(ROLE, "templates", "kubenode-gc.service.j2")) as f:
        return env.from_string(f.read()).render(**values)


def directives(text):
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def test_the_unit_s_runtime_directory_is_the_node_lock_s_directory_made_for_root_alone_and_kept():
    d = directives(unit())
    assert "/run/" + d["RuntimeDirectory"][0] == _ledger.LOCK_DIR  # the modules' lock: a controller run and the timer share it
    assert d["RuntimeDirectoryMode"] == ["0700"] and d["RuntimeDirectoryPreserve"] == ["yes"]  # never removed under a held lock
    assert d["ReadWritePaths"] == ["/var/lib/kubenode-gc", "-/var/log/pods -/var/log/containers"]
    # what the sandbox hides is what the role refuses to put there
    assert d["ProtectHome"] == ["yes"] and d["PrivateTmp"] == ["yes"] and trust.HIDDEN == ("/home", "/root", "/run/user", "/tmp", "/var/tmp")
    assert d["ExecStart"] == ["/usr/bin/python3 -I /usr/local/lib/kubenode-gc/kubenode-gc-timer /etc/kubenode-gc/gc-timer.json"]


def systemd_analyze_version():
    exe = shutil.which("systemd-analyze")
    if not exe:
        return 0
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.match(r"systemd ([0-9]+)", out)
    return int(m.group(1)) if m else 0


@pytest.mark.skipif(systemd_analyze_version() < 250, reason="systemd-analyze security --offline needs systemd 250 or later")
def test_systemd_analyze_rates_the_unit_at_most_2_5(tmp_path):
    """Offline, on the rendered unit (Molecule rates the loaded unit on the node image's systemd 252)."""
    path = tmp_path / "kubenode-gc.service"
    path.write_text(unit())
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(path)], capture_output=True, text=True, check=False)
    exposure = float(re.search(r"Overall exposure level for kubenode-gc\.service: ([0-9]+\.[0-9]+)", out.stdout).group(1))
    assert exposure <= 2.5, out.stdout
