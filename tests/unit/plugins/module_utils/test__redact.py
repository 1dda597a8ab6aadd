# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 11, items 4 and 5: secrets never in results or messages (_redact and its users); symlinked config files."""

import json
import os
import re
import shutil

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config as kcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config as rcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import ConfigFileError, ConfigFiles, redact_texts, redacted_diff, resolve_path
from ansible_collections.kubenode.gc.plugins.module_utils._redact import (
    MARKER,
    is_secret_key,
    redact_in_place,
    redacted,
    scrub,
    scrub_error,
    secret_leaves,
    secret_strings,
)
from ansible_collections.kubenode.gc.plugins.module_utils.config._toml_edit import redact_text as redact_toml
from ansible_collections.kubenode.gc.plugins.module_utils.config._yaml_edit import load
from ansible_collections.kubenode.gc.plugins.module_utils.config._yaml_edit import redact_text as redact_yaml
from ansible_collections.kubenode.gc.plugins.modules import kubelet_config, runtime_config

TOKEN = "kubelet-bearer-9f8e7d6c5b4a"
PASSWORD = "ctrd-registry-pass-1a2b3c"
AUTH = "cm9ib3Q6Y3RyZC1yZWdpc3RyeQ=="

KUBELET = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authorization:
  mode: Webhook
staticPodURL: https://pods.example.com/node-1
staticPodURLHeader:
  Authorization:
  - "Bearer %s"   # rotated monthly
  X-Node: [hdr-value-7]
imageGCHighThresholdPercent: 85
""" % TOKEN

CONTAINERD = """\
version = 2
root = "/var/lib/containerd"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
    username = "robot"
    password = "%s"   # pull robot
    auth = "%s"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
""" % (PASSWORD, AUTH)


# ---------------------------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("name", ["password", "Password", "auth", "auths", "identitytoken", "identity_token", "IdentityToken", "registrytoken",
                                  "token", "bearer_token", "secret", "private_key", "client_key", "staticPodURLHeader", "headers", "header",
                                  "registry_password", "githubToken", "client-secret", "api_key"])
def test_secret_key_names(name):
    assert is_secret_key(name)


@pytest.mark.parametrize("name", ["global_auth_file", "key_file", "tlsPrivateKeyFile", "username", "staticPodURL", "authentication", "root",
                                  "sandbox_image", "ca_file", "config_path", 3, None])
def test_not_secret_key_names(name):
    assert not is_secret_key(name)


def test_kubelet_authorization_struct_is_not_a_secret_but_a_nested_one_is():
    assert not is_secret_key("authorization")
    assert is_secret_key("Authorization", ("staticPodURLHeader",))
    assert is_secret_key("authorization", ("x",))


def test_redacted_replaces_every_scalar_under_a_secret_key_keeps_keys_and_nulls():
    data = {"staticPodURLHeader": {"Authorization": ["Bearer " + TOKEN], "X-A": ["a", "b"]}, "auths": {"r.io": {"auth": AUTH, "email": None}},
            "registry": {"configs": {"r.io": {"auth": {"username": "u", "password": 5, "flag": True}}}}, "root": "/var/lib/containerd",
            "authorization": {"mode": "Webhook"}}
    out = redacted(data)
    assert out == {"staticPodURLHeader": {"Authorization": [MARKER], "X-A": [MARKER, MARKER]}, "auths": {"r.io": {"auth": MARKER, "email": None}},
                   "registry": {"configs": {"r.io": {"auth": {"username": MARKER, "password": MARKER, "flag": MARKER}}}},
                   "root": "/var/lib/containerd", "authorization": {"mode": "Webhook"}}
    assert data["auths"]["r.io"]["auth"] == AUTH  # a copy
    assert [path for path, value in secret_leaves(data)][:2] == [("staticPodURLHeader", "Authorization", 0), ("staticPodURLHeader", "X-A", 0)]
    copy = json.loads(json.dumps(data))
    assert sorted(map(str, redact_in_place(copy))) == sorted(str(v) for p, v in secret_leaves(data))
    assert copy == out


def test_scrub_only_replaces_values_of_four_characters_or_more():
    secrets = secret_strings([TOKEN, "abc", True, None, "Bearer " + TOKEN])
    assert secrets == ["Bearer " + TOKEN, TOKEN]
    assert scrub("header Bearer %s, again %s, abc" % (TOKEN, TOKEN), secrets) == "header %s, again %s, abc" % (MARKER, MARKER)
    exc = scrub_error(ConfigError("rejected: %s." % TOKEN, dict(files=["/x"], msg="x " + TOKEN)), secrets)
    assert str(exc) == "rejected: %s." % MARKER and exc.result == dict(files=["/x"], msg="x " + MARKER)


# ---------------------------------------------------------------------------------------------- file texts


def test_yaml_redaction_keeps_the_rest_of_the_text():
    out, leaves = redact_yaml(KUBELET, "k")
    assert TOKEN not in out and "hdr-value-7]" not in out
    expected = KUBELET.replace('"Bearer %s"   #' % TOKEN, '"%s" #' % MARKER).replace("[hdr-value-7]", "[%s]" % MARKER)
    assert re.sub(r" +#", " #", out) == expected  # ruamel.yaml versions differ in the comment's column
    assert [value for path, value in leaves] == ["Bearer " + TOKEN, "hdr-value-7"]
    plain = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    assert redact_yaml(plain, "k") == (plain, []) and redact_yaml("# nothing\n\n", "k") == ("# nothing\n\n", [])


def test_json_redaction():
    text = '{\n    "kind": "KubeletConfiguration",\n    "staticPodURLHeader": {"Authorization": ["Bearer %s"]}\n}\n' % TOKEN
    out, leaves = redact_yaml(text, "k.json")
    assert json.loads(out) == {"kind": "KubeletConfiguration", "staticPodURLHeader": {"Authorization": [MARKER]}}
    assert out.startswith('{\n    "kind"') and TOKEN not in out


def test_toml_redaction_keeps_the_rest_of_the_text():
    out, leaves = redact_toml(CONTAINERD, "c")
    assert out == CONTAINERD.replace('"robot"', '"%s"' % MARKER).replace(PASSWORD, MARKER).replace(AUTH, MARKER)
    assert [p[-1] for p, v in leaves] == ["username", "password", "auth"]
    inline = 'a = 1\n[x]\nauths = {"r.io" = {auth = "%s"}}\nheaders = {Authorization = ["Bearer %s"]}\n' % (AUTH, TOKEN)
    out = redact_toml(inline, "c")[0]
    assert AUTH not in out and TOKEN not in out and out.startswith("a = 1\n[x]\n")


def test_redact_texts_scrubs_comments_and_hides_what_does_not_parse():
    with_comment = CONTAINERD + "# old password was %s\n" % PASSWORD
    found, secrets = redact_texts([with_comment, "oom = \n", None], lambda t: redact_toml(t, "c"))
    assert PASSWORD in secrets and AUTH in secrets
    assert found[with_comment][0].endswith("# old password was %s\n" % MARKER)
    assert found["oom = \n"] == (MARKER + "\n", []) and found[""] == ("", [])


def test_redacted_diff_shows_other_changes_and_names_changed_secret_keys():
    after = CONTAINERD.replace(PASSWORD, "new-pass-0000").replace('root = "/var/lib/containerd"', 'root = "/data/containerd"')
    found, secrets = redact_texts([CONTAINERD, after], lambda t: redact_toml(t, "c"))
    diff = redacted_diff("/c.toml", CONTAINERD, after, found)
    assert 'root = "/data/containerd"' in diff["after"] and 'root = "/var/lib/containerd"' in diff["before"]
    assert diff["before"].replace("/var/lib/containerd", "/data/containerd") == diff["after"]
    assert diff["after_header"] == '/c.toml (secret values changed: plugins.io.containerd.grpc.v1.cri.registry.configs.registry.example.com.auth.password)'
    assert "new-pass-0000" not in json.dumps(diff) and PASSWORD not in json.dumps(diff)
    same = redacted_diff("/c.toml", CONTAINERD, CONTAINERD, found)
    assert same["after_header"] == "/c.toml"


def test_parse_errors_never_quote_values():
    with pytest.raises(ConfigError) as exc:
        load("token: abc\ntoken: %s\n" % TOKEN, "/k.yaml")
    assert str(exc.value) == 'Cannot parse /k.yaml as YAML: line 2, column 1: found duplicate key "token".'
    with pytest.raises(ConfigError) as exc:
        load("token: !!int %s\n" % TOKEN, "/k.yaml")
    assert str(exc.value) == "Cannot parse /k.yaml as YAML: a tagged value does not convert to the type of its tag."


# ---------------------------------------------------------------------------------------------- the modules' runs


class FakeModule:
    """What ConfigFiles needs of AnsibleModule."""

    def __init__(self):
        self.backups = []

    def atomic_move(self, src, dest, unsafe_writes=False):
        os.replace(src, dest)

    def backup_local(self, path):
        backup = path + ".bak"
        shutil.copy2(path, backup)
        self.backups.append(backup)
        return backup

    def run_command(self, cmd):
        return (1, "", "the file says Bearer %s\n" % TOKEN) if "false" in cmd else (0, "", "")


def kubelet_run(tmp_path, check=False, **params):
    params.setdefault("flag_files", [str(tmp_path / "none")])
    opts = kcfg.options(params_for(kubelet_config.ARGUMENT_SPEC, **params))
    return kcfg.run(ConfigFiles(FakeModule()), opts, check_mode=check)


@pytest.mark.parametrize("check", [False, True])
def test_kubelet_config_results_hold_no_secret(tmp_path, check):
    path = tmp_path / "config.yaml"
    path.write_text(KUBELET)
    res = kubelet_run(tmp_path, check, path=str(path), settings={"imageGCHighThresholdPercent": 90})
    assert res["changed"] is True and TOKEN not in json.dumps(res)
    assert res["config"]["staticPodURLHeader"] == {"Authorization": [MARKER], "X-Node": [MARKER]}
    assert res["config"]["staticPodURL"] == "https://pods.example.com/node-1" and res["config"]["authorization"] == {"mode": "Webhook"}
    assert "-imageGCHighThresholdPercent: 85" not in res["diff"]["before"] and "imageGCHighThresholdPercent: 90" in res["diff"]["after"]
    assert path.read_text() == (KUBELET if check else KUBELET.replace("85", "90"))


def test_kubelet_config_errors_hold_no_secret(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBELET)
    with pytest.raises(ConfigError) as exc:
        kubelet_run(tmp_path, path=str(path), settings={"imageGCHighThresholdPercent": 90}, validate="/bin/false %s")
    assert str(exc.value) == "The validate command '/bin/false %%s' rejected the new %s (rc 1): the file says %s." % (path, MARKER)
    assert path.read_text() == KUBELET


def test_symlink_chain_edits_the_target_and_keeps_the_links(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    target = real / "config.yaml"
    target.write_text(KUBELET)
    os.chmod(target, 0o600)
    (tmp_path / "middle.yaml").symlink_to(target)
    link = tmp_path / "config.yaml"
    link.symlink_to("middle.yaml")
    res = kubelet_run(tmp_path, path=str(link), settings={"imageGCHighThresholdPercent": 90}, backup=True)
    assert res["path"] == str(link) and res["resolved_path"] == str(target)
    assert os.readlink(link) == "middle.yaml" and os.readlink(tmp_path / "middle.yaml") == str(target)
    assert target.read_text() == KUBELET.replace("85", "90") and os.stat(target).st_mode & 0o7777 == 0o600
    assert res["backup_file"] == str(target) + ".bak" and open(res["backup_file"]).read() == KUBELET
    assert sorted(os.listdir(tmp_path)) == ["config.yaml", "middle.yaml", "real"]


def test_dangling_and_looping_links_fail_and_change_nothing(tmp_path):
    link = tmp_path / "config.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(ConfigFileError) as exc:
        kubelet_run(tmp_path, path=str(link), content=KUBELET)
    assert str(exc.value) == "%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (link, tmp_path / "gone.yaml")
    assert sorted(os.listdir(tmp_path)) == ["config.yaml"] and os.path.islink(link)
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    with pytest.raises(ConfigFileError, match="^Cannot resolve %s: Too many levels of symbolic links.$" % loop):
        resolve_path(str(loop))
    assert resolve_path(str(tmp_path / "missing.toml")) == str(tmp_path / "missing.toml")


def runtime_run(check=False, **params):
    params.setdefault("query_runtime", False)
    opts = rcfg.options(params_for(runtime_config.ARGUMENT_SPEC, **params))
    return rcfg.run(ConfigFiles(FakeModule()), opts, check_mode=check)


@pytest.mark.parametrize("check", [False, True])
def test_runtime_config_diff_holds_no_secret_and_follows_links(tmp_path, check):
    target = tmp_path / "etc-config.toml"
    target.write_text(CONTAINERD)
    link = tmp_path / "config.toml"
    link.symlink_to(target.name)
    res = runtime_run(check, runtime="containerd", path=str(link), settings={"root": "/data/containerd"})
    assert res["changed"] is True and res["files"] == [str(link)]
    assert res["resolved_path"] == str(target) and res["resolved_files"] == {str(link): str(target)}
    dumped = json.dumps(res)
    assert PASSWORD not in dumped and AUTH not in dumped and '"robot"' not in dumped
    assert 'root = "/data/containerd"' in res["diff"][0]["after"] and res["diff"][0]["after_header"] == str(link)
    assert os.path.islink(link) and os.readlink(link) == target.name
    assert target.read_text() == (CONTAINERD if check else CONTAINERD.replace('root = "/var/lib/containerd"', 'root = "/data/containerd"'))


def test_crio_links_each_file_written(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "storage.conf").write_text('[storage]\ndriver = "overlay"\ngraphroot = "/var/lib/containers/storage"\n')
    (etc / "crio.conf").write_text('[crio]\nroot = "/var/lib/containers/storage"\n[crio.image]\nglobal_auth_file = "/etc/crio/auth.json"\n'
                                   '[crio.metrics]\nmetrics_token = "%s"\n' % TOKEN)
    for name in ("storage.conf", "crio.conf"):
        (tmp_path / name).symlink_to(etc / name)
    res = runtime_run(runtime="crio", path=str(tmp_path / "crio.conf"), storage_path=str(tmp_path / "storage.conf"), dropin_dir=str(tmp_path / "d"),
                      settings={"graphroot": "/data/storage"})
    assert res["resolved_files"] == {str(tmp_path / "crio.conf"): str(etc / "crio.conf"), str(tmp_path / "storage.conf"): str(etc / "storage.conf")}
    assert res["resolved_path"] == str(etc / "crio.conf")
    assert all(os.path.islink(tmp_path / n) for n in ("storage.conf", "crio.conf"))
    assert 'root = "/data/storage"' in (etc / "crio.conf").read_text() and TOKEN in (etc / "crio.conf").read_text()
    assert TOKEN not in json.dumps(res) and '"/etc/crio/auth.json"' in res["diff"][0]["after"]


def test_parsed_and_redacted_texts_are_kept_but_never_shared():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _toml_edit  # pylint: disable=import-outside-toplevel

    text = '[plugins."io.containerd.grpc.v1.cri".registry.configs."r".auth]\npassword = "hunter2"\n'
    first = _toml_edit.data(text, "c.toml")
    first["plugins"].clear()  # a caller may change its copy
    assert _toml_edit.data(text, "c.toml")["plugins"]["io.containerd.grpc.v1.cri"]["registry"]["configs"]["r"]["auth"] == {"password": "hunter2"}
    shown, leaves = redact_toml(text, "c.toml")
    kept = list(leaves)
    leaves.clear()
    assert kept and redact_toml(text, "c.toml") == (shown, kept) and "hunter2" not in shown
    with pytest.raises(ConfigError):
        _toml_edit.data("[a\n", "bad.toml")
    yshown, yleaves = redact_yaml("password: hunter2\n", "k.yaml")
    ykept = list(yleaves)
    yleaves.clear()
    assert ykept and redact_yaml("password: hunter2\n", "k.yaml") == (yshown, ykept) and "hunter2" not in yshown
