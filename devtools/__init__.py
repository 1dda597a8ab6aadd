# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Development tools of kubenode.gc (not part of the collection): real container runtimes started
on a small tmpfs, offline-built images and pods, node containers.  The tests, the demo and the
benchmarks use them.

Importing this package has no side effects.  Modules that use the collection's own code
(``ansible_collections.kubenode.gc``) need ``devtools.collection.make_importable()`` called first;
the test suite's conftest, ``python -m devtools.cli`` and the benchmarks do that.
"""
