# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-playbook for the integration tests, without importing ansible-core again for every run.

A test run calls ansible-playbook about 1,600 times; on these 2-core machines each process spends about 0.45 CPU-s
importing ansible-core before its first line of work (``python -c 'import ansible.cli.playbook'``), a quarter of all the
CPU the integration step uses. ``Zygote`` starts one interpreter (``python -m devtools.ansible_zygote``) that imports
``ansible.cli.playbook`` and nothing else: no configuration is read beyond what that import reads, no plugin is loaded,
no gRPC is imported. For each run it forks; the child takes the run's whole environment, working directory and argv,
points its stdout and stderr at the caller's files, makes its own local temporary directory as a new process would, and
calls ansible-playbook's own ``main()``, which reads the configuration, loads the plugins and forks its workers as the
command does. Its exit status is the command's.

One thing is kept from run to run: ansible-core's cache of module payloads (``ansiballz_cache`` in the local temporary
directory, the zip of a module and its module_utils that the worker builds once per module and playbook run, about
0.25 CPU-s each here). The zygote's runs share one, as the tasks of one playbook do, so each module's payload is built
by the first run that uses it and read from the cache after. Its key is the module's name, the compression and the
extensions, not its files: the collection must not change while a zygote serves (the tests install it once).

What ansible-core reads at import time (its configuration: ``ANSIBLE_*``) and what the interpreter reads at start
(``PYTHON*``) must be the same for the zygote and the run: ``Zygote.run`` falls back to a new process when they differ,
when the zygote is busy with another run (runs at once stay at once) or gone.

Protocol (stdin/stdout of the zygote, one JSON object per line): {"argv", "env", "cwd", "stdout", "stderr"} ->
{"rc": exit status}.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

# the environment that must not differ between the zygote and a run it serves
FIXED_PREFIXES = ("ANSIBLE_", "PYTHON")


def _fixed(env):
    return {k: v for k, v in env.items() if k.startswith(FIXED_PREFIXES)}


def _own_local_tmp(ansiballz_cache):
    """Give the child the local temporary directory a new ansible-playbook process makes for itself, instead of the
    zygote's, which ansible-core made (and set to be removed at exit) when it was imported; in it, ansible-core's module
    payload cache is the zygote's ``ansiballz_cache`` directory, shared by the runs it serves."""
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    from ansible.utils.path import cleanup_tmp_file  # pylint: disable=import-outside-toplevel

    atexit.unregister(cleanup_tmp_file)  # the zygote's directory is not this run's to remove
    local_tmp = tempfile.mkdtemp(prefix="ansible-local-%s" % os.getpid(), dir=os.path.dirname(C.DEFAULT_LOCAL_TMP))
    atexit.register(cleanup_tmp_file, local_tmp, warn=True)
    os.symlink(ansiballz_cache, os.path.join(local_tmp, "ansiballz_cache"))  # the clean-up removes the link alone
    C.DEFAULT_LOCAL_TMP = local_tmp


def _child(request):
    """In the forked child: become the ansible-playbook command of ``request``; never returns."""
    rc = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.argv = list(request["argv"])
        _own_local_tmp(request["ansiballz_cache"])
        from ansible.cli import playbook  # pylint: disable=import-outside-toplevel  # imported already: a lookup

        try:
            playbook.main()
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        atexit._run_exitfuncs()  # pylint: disable=protected-access  # ansible-core's clean-up of its temporary files
    except BaseException:  # pylint: disable=broad-except
        import traceback  # pylint: disable=import-outside-toplevel

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # pylint: disable=broad-except
                pass
        os._exit(rc)  # pylint: disable=protected-access


def serve():
    """The zygote's loop: import ansible-playbook's code once, then fork a child for each request on stdin."""
    import ansible.cli.playbook  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    requests, answers = sys.stdin, os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing ansible-core writes goes into the answers
    os.close(devnull)
    ansiballz_cache = tempfile.mkdtemp(prefix="kubenode-gc-ansiballz-")
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = dict(json.loads(line), ansiballz_cache=ansiballz_cache)
        pid = os.fork()
        if pid == 0:
            _child(request)
        status = os.waitpid(pid, 0)[1]
        answers.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()
    shutil.rmtree(ansiballz_cache, ignore_errors=True)


class Zygote:
    """One zygote process (started by the first ``run``), for runs in ``env`` (the fixed part must match)."""

    def __init__(self, env):
        self.env = dict(env)
        self._proc = None
        self._lock = threading.Lock()

    def _start(self):
        self._proc = subprocess.Popen([sys.executable, "-m", "devtools.ansible_zygote"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=self.env, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if json.loads(self._proc.stdout.readline() or "{}").get("ready") is not True:
            self.close()
            raise RuntimeError("the ansible-playbook zygote did not start")

    def run(self, argv, env):
        """Run ``argv`` (ansible-playbook and its arguments) in ``env``: a CompletedProcess, as subprocess.run with
        capture_output=True and text=True gives."""
        if _fixed(env) == _fixed(self.env) and self._lock.acquire(blocking=False):
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                return self._served(argv, env)
            finally:
                self._lock.release()
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)

    def _served(self, argv, env):
        with tempfile.TemporaryDirectory(prefix="zygote-") as tmp:
            out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
            request = {"argv": list(argv), "env": dict(env), "cwd": os.getcwd(), "stdout": out, "stderr": err}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            answer = self._proc.stdout.readline()
            if not answer:
                self.close()
                raise RuntimeError("the ansible-playbook zygote ended during a run of %s" % " ".join(argv))
            outputs = []
            for path in (out, err):
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        outputs.append(f.read())
                except FileNotFoundError:
                    outputs.append("")
            return subprocess.CompletedProcess(argv, json.loads(answer)["rc"], outputs[0], outputs[1])

    def close(self):
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


if __name__ == "__main__":
    serve()
