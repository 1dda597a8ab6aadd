# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet fixtures: the installed collection (as in the integration tests) and Docker."""

from tests.integration.conftest import _needs_root, collection_tarball, collections_path  # noqa: F401  pylint: disable=unused-import
