# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's CRI client plus the calls only the harness makes (pods, containers, image removal)."""

from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriClient


class DevCriClient(CriClient):
    """CriClient with the RuntimeService/ImageService calls the harness needs to fill a runtime."""

    def run_pod_sandbox(self, config, runtime_handler=""):
        return self.call("RunPodSandbox", config=config, runtime_handler=runtime_handler).pod_sandbox_id

    def create_container(self, sandbox_id, config, sandbox_config):
        return self.call("CreateContainer", pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config).container_id

    def start_container(self, container_id):
        self.call("StartContainer", container_id=container_id)

    def container_status(self, container_id, verbose=False):
        return self.call("ContainerStatus", container_id=container_id, verbose=verbose)

    def remove_image(self, image):
        self.call("RemoveImage", image={"image": image})

    def pull_image(self, image, sandbox_config=None):
        """PullImage as the kubelet calls it (no credentials); returns the image_ref the runtime answers (its id)."""
        return self.call("PullImage", image={"image": image}, sandbox_config=sandbox_config or {}).image_ref
