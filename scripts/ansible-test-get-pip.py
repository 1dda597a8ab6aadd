"""Offline stand-in for the pip bootstrap script ansible-test downloads.

ansible-test creates its sanity venvs without pip and then runs a cached
"get-pip" script (normally fetched from ci-files.testing.ansible.com, which
this project's machines cannot reach) as ``get-pip <pip install args>``.
This stand-in does the same job with the interpreter's own ensurepip, then
hands its arguments to ``pip install`` (which reaches PyPI as usual).
scripts/test.sh copies it to ~/.ansible/test/cache/get_pip_<version>.py.
"""

import ensurepip
import subprocess
import sys

# get-pip's own flags, not pip's: ensurepip already leaves wheel out.
OWN_FLAGS = {"--no-setuptools", "--no-wheel"}

ensurepip.bootstrap(upgrade=False, default_pip=False)
args = [a for a in sys.argv[1:] if a not in OWN_FLAGS]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
