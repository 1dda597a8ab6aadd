# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the runtimes of the matrix really differ on the wire: one explicit expectation each.

Tests assert these per runtime instead of skipping: a difference that changes is a failure.
"""

import collections

Expect = collections.namedtuple(
    "Expect",
    [
        "runtime_name",  # CRI Version runtime_name
        "sandbox_pinned",  # the runtime reports its sandbox image pinned itself
        "bare_hex_ids",  # image ids without "sha256:"
        "image_ref",  # a container's image_ref in ListContainers: "id" (the image id) or "digest" (a repo digest); containerd's
        # ContainerStatus answers a pulled image's repo digest there, its ListContainers the id
        "container_filesystems",  # ImageFsInfo also reports container filesystems: None, "split" (another filesystem: cri-o's
        # imagestore) or "same" (the image filesystem again: cri-dockerd reports dockerd's data root twice)
        "repo_digests",  # images pulled through the CRI have repo digests (the harness pulls every image)
        "sandbox_image_in_status",  # the verbose Status info names the sandbox image (else: a sandbox's info, the config)
        "log_at_create",  # a container's log file exists once it is created (cri-o starts conmon then), not only once started
        "removes_log_link",  # RemoveContainer removes the container's CRI log path itself (cri-dockerd: its link to Docker's
        # json-file log), wherever that path leads
    ],
)

EXPECT = {
    "containerd-1.6": Expect("containerd", False, False, "id", None, True, True, False, False),
    "containerd-1.7": Expect("containerd", True, False, "id", None, True, True, False, False),
    "containerd-2.1": Expect("containerd", True, False, "id", None, True, False, False, False),
    "containerd-2.2": Expect("containerd", True, False, "id", None, True, False, False, False),
    "containerd-2.3": Expect("containerd", True, False, "id", None, True, False, False, False),
    "crio": Expect("cri-o", True, True, "digest", "split", True, True, True, False),
    # cri-dockerd: the sandbox image reported pinned (its --pod-infra-container-image), ListContainers' image_ref the image
    # id (ContainerStatus says docker-pullable://<repo digest>), the data root reported as image and container filesystem;
    # docker.io's images listed by their short names (busybox:1.36; the modules report every name in full, as the other
    # runtimes list them: the harness's tests compare normalised names)
    "cri-dockerd": Expect("docker", True, False, "id", "same", True, True, False, True),
}


def expect(runtime):
    return EXPECT[runtime.name]


def rpc_calls(runtime, calls, pods):
    """``calls`` plus what finding the sandbox image costs on this runtime: nothing when its Status
    names it; else one PodSandboxStatus when a pod exists (and the sandbox list, when not read anyway)."""
    calls = dict(calls)
    if not expect(runtime).sandbox_image_in_status and ("Status" in calls):
        calls.setdefault("ListPodSandbox", 1)
        if pods:
            calls["PodSandboxStatus"] = 1
    return calls


# Image volumes (KEP-4639, ContainerConfig.mounts[].image): True where the runtime mounts them and reports
# them in ContainerStatus.mounts (containerd 2.1+, cri-o); containerd 1.6/1.7 reject such a container at
# creation (they take the mount for a host path "" and fail "failed to mkdir"). Kept apart from Expect.
IMAGE_VOLUMES = {"containerd-1.6": False, "containerd-1.7": False, "containerd-2.1": True, "containerd-2.2": True, "containerd-2.3": True,
                 "crio": True, "cri-dockerd": False}
# What RemoveImage of an image mounted as a volume does: containerd 2.x removes it (no guard), cri-o refuses
IMAGE_VOLUME_REMOVAL_REFUSED = {"containerd-2.1": False, "containerd-2.2": False, "containerd-2.3": False, "crio": True}
