# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one main() flow of every module (_common.execute), the error family and the atomic write."""

import os
import stat

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _common, _durations, _errors, _quantity
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import ConfigFileError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri, _cri_backend, _ledger


class Exited(Exception):
    pass


class FakeModule:
    def __init__(self, params, check_mode=False, diff=False):
        self.params, self.check_mode, self._diff = params, check_mode, diff
        self.warnings, self.exited, self.failed = [], None, None

    def warn(self, msg):
        self.warnings.append(msg)

    def exit_json(self, **result):
        self.exited = result
        raise Exited()

    def fail_json(self, **result):
        self.failed = result
        raise Exited()


def files_backend(module, opts):
    return "files"


def _execute(module, options, run, backend=files_backend):
    with pytest.raises(Exited):
        _common.execute(module, options, run, backend)
    return module


def test_execute_passes_options_and_check_mode_and_exits_with_the_result():
    seen = {}

    def run(backend, opts, check_mode=False):
        seen.update(backend=backend, opts=opts, check_mode=check_mode)
        return dict(changed=True, value=1, warnings=["careful"], diff={"before": "a", "after": "b"})

    module = _execute(FakeModule({"x": 2}, check_mode=True), lambda p: dict(p, y=3), run)
    assert seen == dict(backend="files", opts={"x": 2, "y": 3}, check_mode=True)
    assert module.exited == dict(changed=True, value=1) and module.warnings == ["careful"]  # no diff without diff mode
    module = _execute(FakeModule({}, diff=True), lambda p: p, run)
    assert module.exited["diff"] == {"before": "a", "after": "b"}


def test_execute_fails_once_with_the_sentence_and_the_partial_result():
    def run(backend, opts, check_mode=False):
        raise _errors.GcError("Removing 1 image(s) failed: gone.", dict(removed=[{"id": "a"}], changed=True))

    module = _execute(FakeModule({}), lambda p: p, run)
    assert module.failed == dict(msg="Removing 1 image(s) failed: gone.", removed=[{"id": "a"}], changed=True)


def test_execute_reports_bad_options_unchanged():
    def options(params):
        raise _errors.OptionError("parallelism must be 1 or more, got 0.")

    module = _execute(FakeModule({}), options, None)
    assert module.failed == dict(msg="parallelism must be 1 or more, got 0.", changed=False)


def test_execute_of_a_cri_module_returns_rpc_calls_also_on_failure(monkeypatch):
    monkeypatch.setattr(_cri_backend, "require_cri_libraries", lambda why="": None)
    module = _execute(FakeModule({"cri_endpoint": None, "cri_timeout": 0}), _cri_backend.cri_options, None, _cri_backend.cri_client)
    assert module.failed == dict(msg="cri_timeout must be a positive number of seconds, got 0.", changed=False, rpc_calls={})


def test_missing_library_fails_with_the_traceback():
    def options(params):
        _common.require_library(False, "ruamel.yaml", "Traceback: no ruamel")

    module = _execute(FakeModule({}), options, None)
    assert "ruamel.yaml" in module.failed["msg"] and module.failed["exception"] == "Traceback: no ruamel"


@pytest.mark.parametrize("cls", [_cri.CriError, _ledger.LedgerError, _durations.DurationError, _quantity.QuantityError, _errors.PolicyError,
                                 _errors.ConfigError, ConfigFileError, _errors.GcError, _errors.OptionError, _common.MissingLibraryError])
def test_every_error_is_a_kubenode_gc_error(cls):
    assert issubclass(cls, _errors.KubenodeGcError)


def test_params_for_gives_the_spec_defaults():
    spec = dict(a=dict(type="int", default=1), b=dict(type="str"))
    assert _common.params_for(spec, b="x") == dict(a=1, b="x")
    with pytest.raises(TypeError):
        _common.params_for(spec, c=1)


def test_atomic_write_keeps_mode_of_an_existing_file_and_gives_new_files_theirs(tmp_path):
    old = tmp_path / "old.conf"
    old.write_text("a")
    os.chmod(old, 0o640)
    atomic_write(str(old), "b")
    assert old.read_text() == "b" and stat.S_IMODE(os.stat(old).st_mode) == 0o640
    new = tmp_path / "new.json"
    atomic_write(str(new), "{}", mode=0o600, keep_owner_mode=False)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600


def test_atomic_write_leaves_the_target_and_no_temporary_file_when_the_check_fails(tmp_path):
    target = tmp_path / "c.toml"
    target.write_text("keep")

    def check(tmp):
        assert os.path.exists(tmp)
        raise ConfigFileError("rejected.")

    with pytest.raises(ConfigFileError):
        atomic_write(str(target), "new", check=check)
    assert target.read_text() == "keep" and os.listdir(tmp_path) == ["c.toml"]
