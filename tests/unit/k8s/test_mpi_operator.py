"""mpi_operator: v2beta1 CRD and controller; MPIJobs in the seeds' shapes."""


def test_crd_serves_v2beta1_only(dgx1_k8s):
    crd = dgx1_k8s.get("CustomResourceDefinition", "mpijobs.kubeflow.org")
    assert crd["spec"]["group"] == "kubeflow.org"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v2beta1", True, True)]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["slotsPerWorker"]["minimum"] == 1


def test_controller_is_pinned_and_locks_its_namespace(dgx1_k8s):
    deployment = dgx1_k8s.get("Deployment", "mpi-operator", "mpi-operator")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "mpioperator/mpi-operator:0.6.0"
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
    assert launcher["command"][:3] == ["mpirun", "-np", "16"]
    assert launcher["command"][-1] == "--max_steps=16000"


def test_2_workers_with_8_gpus(dgx1_k8s):
    job = dgx1_k8s.get("MPIJob", "tf2-resnet50-02x08x02", "benchmarks")
    assert (job["spec"]["slotsPerWorker"], worker(job)["replicas"]) == (8, 2)
    assert worker(job)["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:3] == ["mpirun", "-np", "16"]
    assert launcher["command"][9:11] == ["-x", "NCCL_IB_DISABLE=0"]


def test_t4_roce_job_requests_the_roce_resource(t4_roce):
    job = t4_roce.get("MPIJob", "tf-cnn-4x01-roce", "horovod")
    limits = worker(job)["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "rdma/shared_roce0": 1}
    assert worker(job)["replicas"] == 4
