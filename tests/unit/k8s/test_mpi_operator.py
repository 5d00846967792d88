"""mpi_operator: v2beta1 CRD and controller; MPIJobs in the reference documents' shapes."""

import json
from pathlib import Path

import pytest

CRDS = Path(__file__).resolve().parents[3] / "schemas" / "crds"


def test_crd_serves_v2beta1_only_with_the_stored_upstream_schema(dgx1_k8s):
    crd = dgx1_k8s.get("CustomResourceDefinition", "mpijobs.kubeflow.org")
    assert crd["spec"]["group"] == "kubeflow.org"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v2beta1", True, True)]
    # Not a hand-written schema: the one stored (with its source) in schemas/crds/.
    stored = json.loads((CRDS / "kubeflow.org_v2beta1_MPIJob.json").read_text())
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == stored
    source = json.loads((CRDS / "sources.json").read_text())["kubeflow.org_v2beta1_MPIJob.json"]
    assert crd["metadata"]["annotations"]["gpuforge.io/schema-source"] == f"kubeflow/mpi-operator@{source['commit']}"
    spec = stored["properties"]["spec"]["properties"]
    assert spec["mpiImplementation"]["enum"] == ["OpenMPI", "Intel", "MPICH"]


def test_controller_is_pinned_and_locks_its_namespace(dgx1_k8s):
    deployment = dgx1_k8s.get("Deployment", "mpi-operator", "mpi-operator")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "mpioperator/mpi-operator:0.7.0"
    assert "--lock-namespace=mpi-operator" in container["args"]
    binding = dgx1_k8s.get("ClusterRoleBinding", "mpi-operator")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]


def worker(job):
    return job["spec"]["mpiReplicaSpecs"]["Worker"]


def test_16_single_gpu_workers(dgx1_k8s):
    job = dgx1_k8s.get("MPIJob", "tf2-a2d2-16x01x02-gpu", "ai-team")
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["spec"]["slotsPerWorker"] == 1
    assert worker(job)["replicas"] == 16
    pod = worker(job)["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {
        "nvidia.com/gpu": 1,
        "rdma/shared_ib0": 1,
        "rdma/shared_ib1": 1,
        "rdma/shared_ib2": 1,
        "rdma/shared_ib3": 1,
    }
    assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}
    assert container["securityContext"]["runAsUser"] == 1075481000
    assert "privileged" not in container["securityContext"]
    assert pod["serviceAccountName"] == "mpi"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "adas-data-pvc"}} in pod["volumes"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    # Runs as a non-root user: no --allow-run-as-root, and sshd on that user's port (-p 2222 to ssh).
    assert launcher["command"][:3] == ["mpirun", "-np", "16"]
    assert launcher["command"][-1] == "--max_steps=16000"
    assert launcher["securityContext"]["runAsUser"] == 1075481000
    assert container["command"] == ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
    assert container["readinessProbe"]["tcpSocket"] == {"port": 2222}
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    rsh = launcher["command"].index("plm_rsh_args")
    assert launcher["command"][rsh - 1 : rsh + 2] == ["-mca", "plm_rsh_args", "-p 2222"]


def test_2_workers_with_8_gpus(dgx1_k8s):
    job = dgx1_k8s.get("MPIJob", "tf2-resnet50-02x08x02", "benchmarks")
    assert (job["spec"]["slotsPerWorker"], worker(job)["replicas"]) == (8, 2)
    assert worker(job)["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:4] == ["mpirun", "--allow-run-as-root", "-np", "16"]
    assert launcher["command"][8:12] == ["-x", "NCCL_DEBUG=INFO", "-x", "NCCL_IB_DISABLE=0"]


def test_t4_roce_job_requests_the_roce_resource(t4_roce):
    job = t4_roce.get("MPIJob", "tf-cnn-4x01-roce", "horovod")
    limits = worker(job)["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "rdma/shared_roce0": 1}
    assert worker(job)["replicas"] == 4


NGC_TF = "nvcr.io/nvidia/tensorflow:20.03-tf2-py3"
# The workload image of roles/gpuforge/defaults/main/k8s.yml (gpuforge_workload_image), the jobs' default.
WORKLOAD = "registry.example.invalid/gpuforge/workload:1.0.0"
NCCL_BINARY = "/usr/local/bin/all_reduce_perf"
# (workers, GPUs per worker, ranks per worker, all_reduce_perf -g) of IBM Redpaper REDP-5610's NCCL jobs.
NCCL_SHAPES = {
    "nccl-allreduce-1x8": (1, 8, 1, "8"),
    "nccl-allreduce-2x8": (2, 8, 8, "1"),
    "nccl-allreduce-16x1": (16, 1, 1, "1"),
}


def containers(job):
    specs = job["spec"]["mpiReplicaSpecs"]
    return specs["Launcher"]["template"]["spec"]["containers"][0], specs["Worker"]["template"]["spec"]


@pytest.mark.parametrize("name", sorted(NCCL_SHAPES))
def test_seed_nccl_shapes_are_rendered_by_default(dgx1_k8s, name):
    workers, gpus, ranks, per_rank = NCCL_SHAPES[name]
    job = dgx1_k8s.get("MPIJob", name, "ai-team")
    launcher, pod = containers(job)
    command = launcher["command"]
    assert (job["spec"]["slotsPerWorker"], worker(job)["replicas"]) == (ranks, workers)
    assert command[:4] == ["mpirun", "--allow-run-as-root", "-np", str(workers * ranks)]
    tail = command[command.index(NCCL_BINARY) :]
    assert tail == [NCCL_BINARY, "-b", "8", "-e", "256M", "-f", "2", "-g", per_rank]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": gpus} | {
        f"rdma/shared_ib{i}": 1 for i in range(4)
    }


@pytest.mark.parametrize("name", ["nccl-allreduce-2x8", "resnet50-2x8", "resnet50-4x1-roce"])
def test_seed_jobs_have_ssh_workers_rdma_shm_and_the_data_pvc(dgx1_k8s, name):
    job = dgx1_k8s.get("MPIJob", name, "ai-team")
    launcher, pod = containers(job)
    container = pod["containers"][0]
    # v2beta1: the launcher reaches the workers over SSH; the workers run sshd in the foreground.
    assert job["spec"]["sshAuthMountPath"] == "/root/.ssh"
    assert container["command"] == ["/usr/local/sbin/start-sshd"]  # the workload image's sshd entry point
    assert container["readinessProbe"]["tcpSocket"] == {"port": 22}
    assert "plm_rsh_args" not in launcher["command"]
    assert launcher["image"] == container["image"] == WORKLOAD
    assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "adas-data-pvc"}} in pod["volumes"]
    assert {"name": "data", "mountPath": "/workspace/data"} in container["volumeMounts"]


def test_resnet50_seed_shapes(dgx1_k8s):
    two_by_eight = dgx1_k8s.get("MPIJob", "resnet50-2x8", "ai-team")
    four_by_one = dgx1_k8s.get("MPIJob", "resnet50-4x1-roce", "ai-team")
    assert (two_by_eight["spec"]["slotsPerWorker"], worker(two_by_eight)["replicas"]) == (8, 2)
    assert (four_by_one["spec"]["slotsPerWorker"], worker(four_by_one)["replicas"]) == (1, 4)
    # The workload image's trainer, DDP over the MPI ranks with rank 0's worker as the rendezvous host.
    assert containers(two_by_eight)[0]["command"][-6:] == [
        "python3", "/opt/gpuforge/resnet50/resnet50_bench.py", "--batch-size", "64",
        "--master-addr", "resnet50-2x8-worker-0.resnet50-2x8",
    ]  # fmt: skip


def test_t4_roce_renders_only_the_single_gpu_seed_shapes(t4_roce):
    names = sorted(job["metadata"]["name"] for job in t4_roce.kinds("MPIJob"))
    assert names == ["nccl-allreduce-16x1", "resnet50-4x1-roce", "tf-cnn-4x01-roce"]
    job = t4_roce.get("MPIJob", "resnet50-4x1-roce", "horovod")
    limits = worker(job)["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "rdma/shared_roce0": 1}
    # No Storage Scale volume in this cluster: no data volume.
    assert [v["name"] for v in worker(job)["template"]["spec"]["volumes"]] == ["dshm"]


DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_image_digest_is_appended_when_the_inventory_pins_it(render_scenario):
    images = {
        "ngc_tensorflow": {"repository": "nvcr.io/nvidia/tensorflow", "tag": "20.03-tf2-py3", "digest": DIGEST},
        # The workload image pinned by the site's digest (gpuforge_workload_image_*), the jobs' default.
        "workload": {
            "repository": "{{ gpuforge_workload_image_repository }}",
            "tag": "{{ gpuforge_workload_image_tag }}",
            "digest": "{{ gpuforge_workload_image_digest }}",
        },
    }
    addons = ["rdma_shared_device_plugin", "mpi_operator"]
    jobs = [{"name": "nccl-allreduce-16x1", "workers": 16, "image": "ngc_tensorflow", "command": ["true"]}]
    rendered = render_scenario(
        "t4_roce",
        "vsphere-t4",
        gpuforge_k8s_enabled_addons=addons,
        mpi_operator_images=images,
        mpi_operator_jobs=jobs,
        gpuforge_workload_image_repository="registry.site.example/ml/workload",
        gpuforge_workload_image_tag="2.1",
        gpuforge_workload_image_digest=DIGEST,
        mpi_operator_extra_jobs=[{"name": "default-image", "command": ["true"]}],
    )
    launcher, pod = containers(rendered.get("MPIJob", "nccl-allreduce-16x1", "horovod"))
    assert launcher["image"] == pod["containers"][0]["image"] == f"{NGC_TF}@{DIGEST}"
    launcher, pod = containers(rendered.get("MPIJob", "default-image", "horovod"))
    assert launcher["image"] == f"registry.site.example/ml/workload:2.1@{DIGEST}"


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ({"repository": "nvcr.io/nvidia/tensorflow", "tag": "20.03-tf2-py3", "digest": "sha256:abc"}, "digest"),
        ({"repository": "nvcr.io/nvidia/tensorflow", "tag": "latest", "digest": ""}, "latest"),
    ],
)
def test_bad_image_pins_are_refused(render_error, image, why):
    message = render_error(
        "t4_roce",
        gpuforge_k8s_enabled_addons=["rdma_shared_device_plugin", "mpi_operator"],
        mpi_operator_images={"workload": image},
    )
    assert "MPIJob nccl-allreduce-16x1: image" in message
    assert "mpi_operator_images.workload" in message
