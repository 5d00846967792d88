"""`gpuforge k8s verify`: check a deployed cluster's GPU and RDMA add-ons through its API server.

Run after the add-ons are applied, with the cluster's kubeconfig (--kubeconfig, else the inventory's
gpuforge_kubeconfig). Four checks, each a ``k8s_check`` record (schemas/k8s-check.schema.json) in
``<run dir>/k8s/verify.json``:

1. every GPU node of the inventory offers ``nvidia.com/gpu`` (the device plugin registered) and as many as its
   expected hardware says (gpuforge_expected_gpu_count, else the gpu_count of its gpuforge_expected_system);
2. every RDMA node offers each RDMA resource of the rendered RDMA shared device plugin config
   (``<rendered>/<cluster>/rdma_shared_device_plugin/configmap.yaml``, from ``gpuforge k8s render``);
3. a CUDA vector-add pod (roles/k8s_addons_common/templates/verify/cuda-vector-add.yaml.j2) reaches Succeeded and
   its log says ``Test PASSED``;
4. an MPIJob running nccl-tests all_reduce_perf with the RDMA resources (rendered from the reference jobs' template,
   roles/mpi_operator/templates/mpijob.yaml.j2) gets its Succeeded condition, and its launcher log goes through the
   host benchmarks' nccl-tests parser and busbw threshold (gpuforge_bench_nccl_min_busbw_gbyte_per_s);
5. the in-pod RDMA test (roles/rdma_workload_access/templates/verify/rdma-perftest-pod.yaml.j2): a server and a
   client pod on two RDMA nodes, unprivileged with IPC_LOCK and one RDMA resource each, print ibv_devinfo and
   ibstatus (``rdma_pod_port`` checks) and run ib_write_bw between them. The pair is judged like a host benchmark
   pair (src/gpuforge/k8s_rdma_test.py: the same parsers, gpuforge_expected_ib_write_bw through
   gpuforge_bench_ib_pair_threshold and gpuforge_bench_attribution_floors) and written as the host benchmark writes
   it (the block and its records, through the gpuforge_bench_summary filter), to
  ``<run dir>/bench/k8s-rdma-<id>/summary.json``, so the report shows it as an ib_write_bw benchmark_run.

The judging is in src/gpuforge/k8s_verify_judge.py; this module fetches and submits objects with the
``kubernetes`` Python client and keeps every response as the API server's JSON. It has only been run against
recorded API responses served by a local HTTPS server (tests/unit/k8s/test_verify_cli.py), never a real cluster.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from gpuforge import paths
from gpuforge.paths import collection_import

# The one status vocabulary (gpuforge_checks): every check of the verify document has one of these.
_checks = collection_import("plugins.module_utils.gpuforge_checks")
_records_module = collection_import("plugins.module_utils.gpuforge_records")
PASS, FAIL, UNKNOWN = _checks.PASS, _checks.FAIL, _checks.UNKNOWN

# NVIDIA's CUDA sample image for vectorAdd, as NVIDIA's own verification pods run it ("Run a Sample Workload",
# https://docs.nvidia.com/datacenter/cloud-native/confidential-containers/latest/run-sample-workload.html).
# gpuforge ships no digest it has not read from the registry: pin one with gpuforge_k8s_verify_vector_add_image.
DEFAULT_VECTOR_ADD_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
VECTOR_ADD_TEMPLATE = (
    paths.PROJECT_ROOT / "roles" / "k8s_addons_common" / "templates" / "verify" / "cuda-vector-add.yaml.j2"
)
MPIJOB_TEMPLATE = paths.PROJECT_ROOT / "roles" / "mpi_operator" / "templates" / "mpijob.yaml.j2"
RDMA_TEST_TEMPLATE = (
    paths.PROJECT_ROOT / "roles" / "rdma_workload_access" / "templates" / "verify" / "rdma-perftest-pod.yaml.j2"
)
ROLE_DEFAULTS = (
    paths.PROJECT_ROOT / "roles" / "gpuforge" / "defaults" / "main",
    paths.PROJECT_ROOT / "roles" / "gpuforge_bench" / "defaults" / "main.yml",
    paths.PROJECT_ROOT / "roles" / "nvidia_device_plugin" / "defaults" / "main.yml",
    paths.PROJECT_ROOT / "roles" / "mpi_operator" / "defaults" / "main.yml",
    paths.PROJECT_ROOT / "roles" / "rdma_workload_access" / "defaults" / "main.yml",
)
MPIJOB_GROUP, MPIJOB_VERSION, MPIJOB_PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
REQUEST_TIMEOUT = (10, 60)  # (connect, read) seconds of every API call
WRITTEN_BY = "gpuforge k8s verify"


class VerifyError(RuntimeError):
    """Verification could not run; the message names the cause and the fix (status: the HTTP status, if any)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass
class Options:
    """What the command line (or a test) asks for."""

    inventory: Path
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    rendered: Path | None = None
    vector_add_image: str | None = None
    nccl_image: str | None = None
    nccl_workers: int = 2
    min_busbw_gbyte_per_s: float | None = None
    rdma_image: str | None = None
    pod_timeout: float = 300
    job_timeout: float = 1800
    poll_interval: float = 5
    skip_workloads: bool = False
    keep: bool = False
    run_dir: Path | None = None


@dataclass
class Plan:
    """What the inventory and the rendered manifests say the cluster must show."""

    gpu_nodes: dict  # Kubernetes node name -> expected nvidia.com/gpu (None: the inventory does not say)
    rdma_nodes: list
    rdma: list  # [{name: "rdma/shared_ib0", hca_max: 100}]
    variables: dict  # the settings below, after the inventory and the role defaults
    notes: list = field(default_factory=list)
    systems: dict = field(default_factory=dict)  # Kubernetes node name -> its expected system ({} if none)


def _k8s_verify_utils():
    from gpuforge import k8s_verify_judge

    return k8s_verify_judge


def _k8s_rdma_test():
    from gpuforge import k8s_rdma_test

    return k8s_rdma_test


# -- the inventory ---------------------------------------------------------------------------------------------

_SETTINGS = (
    "gpuforge_kubeconfig",
    "gpuforge_kube_context",
    "gpuforge_k8s_cluster_name",
    "gpuforge_k8s_rdma_nodes_group",
    "gpuforge_k8s_gpu_nodes_group",
    "gpuforge_expected_systems",
    "gpuforge_bench_nccl_min_busbw_gbyte_per_s",
    "gpuforge_k8s_verify_vector_add_image",
    "gpuforge_k8s_verify_nccl_image",
    "gpuforge_k8s_verify_namespace",
    "nvidia_device_plugin_time_slicing_replicas",
    "rdma_workload_access_namespaces",
    "mpi_operator_nccl_tests_binary",
    "mpi_operator_nccl_tests_args",
    "gpuforge_workload_image",
    "gpuforge_expected_ib_write_bw",
    "gpuforge_expected_link_speeds",
    "gpuforge_bench_ib_min_fraction",
    "gpuforge_bench_ib_median_fraction",
    "gpuforge_bench_ib_expected_gbit_per_s",
    "gpuforge_bench_threshold_sources",
    "rdma_workload_access_service_account",
    "rdma_workload_access_capability",
    "rdma_workload_access_rdma_test",
    "rdma_workload_access_rdma_test_image",
    "rdma_workload_access_rdma_test_resource",
    "rdma_workload_access_rdma_test_nodes",
    "rdma_workload_access_rdma_test_ib_write_bw",
    "gpuforge_k8s_platform",
)


def _trusted(value):
    """The roles' defaults as templates (ansible-core 2.19 renders only strings trusted as templates; these files
    are the project's own, as a play's role defaults are)."""
    from ansible.template import trust_as_template

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _role_defaults(loader) -> dict:
    values: dict = {}
    for source in ROLE_DEFAULTS:
        files = sorted(source.glob("*.yml")) if source.is_dir() else [source]
        for path in files:
            values.update(_trusted(loader.load_from_file(str(path)) or {}))
    return values


def read_inventory(inventory: Path) -> tuple[dict, dict]:
    """({host: its variables}, {group: [hosts]}) of an inventory, templated, over the roles' defaults."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    from gpuforge.inventory_check import InventoryError, check_inventory

    try:
        check_inventory(inventory)
    except InventoryError as exc:
        raise VerifyError(str(exc)) from None
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=manager)
    defaults = _role_defaults(loader)
    hosts: dict = {}
    wanted = {*_SETTINGS, "k8s_node_name", "gpuforge_expected_gpu_count", "gpuforge_expected_system"}
    for host in manager.get_hosts("all"):
        merged = {**defaults, **variables.get_vars(host=host, include_hostvars=False)}
        templar = Templar(loader=loader, variables=merged)
        resolved = {}
        for name in wanted:
            if name not in merged:
                continue
            try:
                resolved[name] = templar.template(merged[name])
            except AnsibleError as exc:
                raise VerifyError(f"inventory {inventory}: {host.name}: {name} cannot be templated: {exc}") from None
        hosts[host.name] = resolved
    groups = {name: [host.name for host in group.get_hosts()] for name, group in manager.groups.items()}
    return hosts, groups


def rendered_rdma(rendered: Path, cluster: str) -> list:
    """The RDMA resources of `cluster`'s rendered RDMA shared device plugin config: the ConfigMap of the
    rdma_shared_device_plugin add-on, or on the operator path the NicClusterPolicy's rdmaSharedDevicePlugin.config.
    """
    folder = rendered / cluster
    configmap = folder / "rdma_shared_device_plugin" / "configmap.yaml"
    policy = folder / "openshift_gpu_operators" / "nicclusterpolicy.yaml"
    path = configmap if configmap.is_file() or not policy.is_file() else policy
    if not path.is_file():
        raise VerifyError(
            f"{configmap} does not exist: render the add-ons first ('gpuforge k8s render -i <inventory>'), or point "
            "--rendered at the folder that holds <cluster>/rdma_shared_device_plugin/"
        )
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "ConfigMap":
            config = (doc.get("data") or {}).get("config.json")
        elif doc.get("kind") == "NicClusterPolicy":
            config = ((doc.get("spec") or {}).get("rdmaSharedDevicePlugin") or {}).get("config")
        else:
            continue
        if config:
            try:
                return _k8s_verify_utils().rdma_resources(config)
            except ValueError as exc:
                raise VerifyError(f"{path}: {exc}") from None
    raise VerifyError(f"{path} holds no RDMA shared device plugin config: render the add-ons again")


def plan(options: Options) -> Plan:
    """Expected GPUs per node, RDMA nodes and resources, and the settings (inventory over the role defaults)."""
    utils = _k8s_verify_utils()
    hosts, groups = read_inventory(options.inventory)
    first = next(iter(hosts.values()), {})
    settings = {name: first.get(name) for name in _SETTINGS}
    gpu_group = settings.get("gpuforge_k8s_gpu_nodes_group") or "gpu_nodes"
    rdma_group = settings.get("gpuforge_k8s_rdma_nodes_group") or "gpu_nodes"
    gpu_nodes, notes, systems = {}, [], {}
    for host, host_vars in hosts.items():
        known = host_vars.get("gpuforge_expected_systems") or {}
        system = known.get(host_vars.get("gpuforge_expected_system")) if isinstance(known, dict) else None
        systems[host_vars.get("k8s_node_name") or host] = system if isinstance(system, dict) else {}
    for host in groups.get(gpu_group, []):
        host_vars = hosts[host]
        name = host_vars.get("k8s_node_name") or host
        count = utils.expected_gpu_count(
            host_vars,
            host_vars.get("gpuforge_expected_systems") or {},
            host_vars.get("nvidia_device_plugin_time_slicing_replicas") or 0,
        )
        if count is None:
            notes.append(f"{host}: no gpuforge_expected_gpu_count or gpuforge_expected_system; GPUs not judged")
        gpu_nodes[name] = count
    if not gpu_nodes:
        raise VerifyError(f"inventory {options.inventory} has no host in group {gpu_group}: nothing to verify")
    rdma_nodes = sorted(hosts[host].get("k8s_node_name") or host for host in groups.get(rdma_group, []))
    rendered = options.rendered or paths.ARTIFACTS_DIR / "k8s"
    rdma = rendered_rdma(rendered, str(settings.get("gpuforge_k8s_cluster_name") or "lab")) if rdma_nodes else []
    return Plan(gpu_nodes, rdma_nodes, rdma, settings, notes, systems)


# -- the API server --------------------------------------------------------------------------------------------


class Cluster:
    """The few API calls verification makes, each returning the API server's JSON (dicts, or text for logs)."""

    def __init__(self, kubeconfig: str, context: str | None = None):
        from kubernetes import client, config

        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise VerifyError(
                f"kubeconfig {path} does not exist: pass --kubeconfig or set gpuforge_kubeconfig in the inventory"
            )
        configuration = client.Configuration()
        try:
            config.load_kube_config(str(path), context=context or None, client_configuration=configuration)
        except config.ConfigException as exc:
            raise VerifyError(
                f"kubeconfig {path}{f' (context {context})' if context else ''} cannot be used: {exc}; fix the "
                "file (server, certificate-authority-data, a token or client-certificate-data/client-key-data) or "
                "pick a context that exists with --context"
            ) from None
        except (ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
            raise VerifyError(f"kubeconfig {path} is not a valid kubeconfig: {exc}") from None
        configuration.retries = 1  # an unreachable server fails in seconds, not after urllib3's default retries
        self.server = configuration.host
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def _call(self, what: str, function, *args, raw: bool = False, **kwargs):
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = function(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            raise self._api_error(what, exc) from None
        except HTTPError as exc:
            reason = getattr(exc, "reason", None) or exc
            hint = (
                "the server's certificate does not match the kubeconfig's certificate-authority-data (or its name)"
                if "CERTIFICATE" in str(reason).upper()
                else "check the kubeconfig's server address, that the API server runs, and the network path to it"
            )
            raise VerifyError(f"cannot reach the API server {self.server} ({what}): {reason}; {hint}") from None
        data = response.data.decode("utf-8", errors="replace")
        return data if raw else json.loads(data)

    def _api_error(self, what: str, exc) -> VerifyError:
        try:
            message = json.loads(exc.body or "{}").get("message") or exc.reason
        except (ValueError, AttributeError):
            message = exc.reason
        if exc.status == 401:
            fix = "the token or client certificate was rejected: get a current kubeconfig for this cluster"
        elif exc.status == 403:
            fix = (
                "the kubeconfig's user may not do this: it needs list nodes, create/get/delete pods and pods/log, "
                "and create/get/delete mpijobs.kubeflow.org in the namespace"
            )
        else:
            fix = "see the API server's message"
        return VerifyError(f"API server {self.server}: {what}: {exc.status} {message}; {fix}", exc.status)

    def nodes(self) -> dict:
        return self._call("list nodes", self.core.list_node)

    def namespace(self, name: str) -> dict:
        try:
            return self._call(f"get namespace {name}", self.core.read_namespace, name)
        except VerifyError as exc:
            if exc.status == 404:
                raise VerifyError(
                    f"namespace {name} does not exist on {self.server}: apply the rdma_workload_access add-on (its "
                    "namespaces have the mpi ServiceAccount with IPC_LOCK) or pass --namespace",
                    404,
                ) from None
            raise

    def has_mpijob_crd(self) -> bool:
        """Whether the API server serves mpijobs in kubeflow.org/v2beta1 (API discovery; 404: no such group)."""
        try:
            resources = self._call(
                f"discover {MPIJOB_GROUP}/{MPIJOB_VERSION}",
                self.api.call_api,
                f"/apis/{MPIJOB_GROUP}/{MPIJOB_VERSION}",
                "GET",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except VerifyError as exc:
            if exc.status == 404:
                return False
            raise
        return any(item.get("name") == MPIJOB_PLURAL for item in resources.get("resources") or [])

    def create_pod(self, body: dict) -> dict:
        meta = body["metadata"]
        return self._call(f"create pod {meta['name']}", self.core.create_namespaced_pod, meta["namespace"], body)

    def pod(self, namespace: str, name: str) -> dict:
        return self._call(f"get pod {name}", self.core.read_namespaced_pod, name, namespace)

    def pods(self, namespace: str, selector: str) -> dict:
        return self._call(f"list pods {selector}", self.core.list_namespaced_pod, namespace, label_selector=selector)

    def log(self, namespace: str, name: str) -> str:
        return self._call(f"log of pod {name}", self.core.read_namespaced_pod_log, name, namespace, raw=True)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._call(f"delete pod {name}", self.core.delete_namespaced_pod, name, namespace)

    def create_mpijob(self, body: dict) -> dict:
        meta = body["metadata"]
        return self._call(
            f"create MPIJob {meta['name']}",
            self.custom.create_namespaced_custom_object,
            MPIJOB_GROUP,
            MPIJOB_VERSION,
            meta["namespace"],
            MPIJOB_PLURAL,
            body,
        )

    def mpijob(self, namespace: str, name: str) -> dict:
        return self._call(
            f"get MPIJob {name}",
            self.custom.get_namespaced_custom_object,
            MPIJOB_GROUP,
            MPIJOB_VERSION,
            namespace,
            MPIJOB_PLURAL,
            name,
        )

    def delete_mpijob(self, namespace: str, name: str) -> None:
        self._call(
            f"delete MPIJob {name}",
            self.custom.delete_namespaced_custom_object,
            MPIJOB_GROUP,
            MPIJOB_VERSION,
            namespace,
            MPIJOB_PLURAL,
            name,
        )


# -- manifests -------------------------------------------------------------------------------------------------


def _render(template: Path, **context) -> dict:
    """The one object of a gpuforge manifest template, rendered with plain Jinja2 (to_json as Ansible's)."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,  # Ansible's template module default
        keep_trailing_newline=True,
    )
    environment.filters["to_json"] = json.dumps
    text = environment.get_template(template.name).render(ansible_managed=f"Rendered by {WRITTEN_BY}", **context)
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    if len(docs) != 1:
        raise VerifyError(f"{template} rendered {len(docs)} objects, expected one")
    return docs[0]


def vector_add_pod(name: str, namespace: str, image: str) -> dict:
    return _render(VECTOR_ADD_TEMPLATE, pod={"name": name, "namespace": namespace, "image": image, "node_selector": {}})


def nccl_mpijob(name: str, namespace: str, image: str, settings: dict, gpus: int, workers: int, rdma: list) -> dict:
    """The verification MPIJob: the reference jobs' template with all_reduce_perf, one rank per GPU, every rail."""
    binary = settings.get("mpi_operator_nccl_tests_binary") or "all_reduce_perf"
    args = list(settings.get("mpi_operator_nccl_tests_args") or [])
    job = {
        "name": name,
        "namespace": namespace,
        "image": image,
        "workers": workers,
        "gpus_per_worker": gpus,
        "command": [binary, *args, "-g", "1"],
        "rdma_resources": [resource["name"].split("/", 1)[1] for resource in rdma],
        "env": {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "0"},
        "pvc": {},
        "service_account": "mpi",
        "shm_size": "",
        # The workload image ships no sshd host keys: its start-sshd makes them, then runs sshd -D -e (images/workload).
        "worker_command": (
            ["/usr/local/sbin/start-sshd"]
            if image == settings.get("gpuforge_workload_image")
            else ["/usr/sbin/sshd", "-De"]
        ),
        "ssh_auth_mount_path": "/root/.ssh",
        "ssh_port": 22,
    }
    return _render(MPIJOB_TEMPLATE, manifest={"job": {**job, "slots_per_worker": gpus}})


def rdma_test_pod(name: str, role: str, node: str, settings: dict, resource: str, image: str, **extra) -> dict:
    """One pod of the in-pod RDMA test: the template rdma_workload_access renders, with the same settings."""
    pod = {
        "name": name,
        "namespace": extra.pop("namespace"),
        "role": role,
        "node": node,
        "image": image,
        "resource": resource,
        "service_account": settings.get("rdma_workload_access_service_account") or "mpi",
        "capability": settings.get("rdma_workload_access_capability") or "IPC_LOCK",
        "platform": settings.get("gpuforge_k8s_platform") or "kubernetes",
        "subdomain": "",
        "ib_write_bw": rdma_test_arguments(settings),
        **extra,
    }
    return _render(RDMA_TEST_TEMPLATE, manifest={"pod": pod})


def rdma_test_arguments(settings: dict) -> dict:
    """ib_write_bw's arguments of the in-pod test (rdma_workload_access_rdma_test_ib_write_bw), numbers as ints."""
    arguments = dict(settings.get("rdma_workload_access_rdma_test_ib_write_bw") or {})
    defaults = {"binary": "ib_write_bw", "port": 1, "tcp_port": 18515, "duration_s": 5, "size_bytes": 65536, "qps": 1}
    out = {**defaults, **{key: value for key, value in arguments.items() if value not in (None, "")}}
    try:
        for key in ("port", "tcp_port", "duration_s", "size_bytes", "qps"):
            out[key] = int(out[key])
    except (TypeError, ValueError):
        raise VerifyError(
            f"rdma_workload_access_rdma_test_ib_write_bw: {key} must be a whole number, not {out[key]!r}"
        ) from None
    return out


# -- the run ---------------------------------------------------------------------------------------------------


@dataclass
class Waiter:
    """Polls until done() or the timeout; the clock and sleep are injectable for tests."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def until(self, fetch, done, timeout: float, interval: float):
        deadline = self.clock() + timeout
        current = fetch()
        while not done(current) and self.clock() < deadline:
            self.sleep(interval)
            current = fetch()
        return current, done(current)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _vector_add(cluster, options, settings, namespace, out, suffix, waiter):
    utils = _k8s_verify_utils()
    image = options.vector_add_image or settings.get("gpuforge_k8s_verify_vector_add_image") or DEFAULT_VECTOR_ADD_IMAGE
    body = vector_add_pod(f"gpuforge-vector-add-{suffix}", namespace, image)
    _write(out / "cuda-vector-add.yaml", yaml.safe_dump(body, sort_keys=False))
    name = body["metadata"]["name"]
    cluster.create_pod(body)
    pod, finished = waiter.until(
        lambda: cluster.pod(namespace, name), utils.pod_finished, options.pod_timeout, options.poll_interval
    )
    text = cluster.log(namespace, name) if finished or (pod.get("status") or {}).get("phase") == "Running" else ""
    _write(out / "cuda-vector-add.log", text)
    if not options.keep:
        cluster.delete_pod(namespace, name)
    return [utils.judge_vector_add(pod, text, None if finished else options.pod_timeout)]


def _mpijob(cluster, options, settings, namespace, out, suffix, waiter, plan_: Plan):
    utils = _k8s_verify_utils()
    nccl = paths.collection_import("plugins.module_utils.gpuforge_nccl_tests")
    min_busbw_gbyte_per_s = (
        options.min_busbw_gbyte_per_s
        if options.min_busbw_gbyte_per_s is not None
        else settings.get("gpuforge_bench_nccl_min_busbw_gbyte_per_s")
    )
    # The site's workload image (gpuforge_workload_image) by default, as the rendered MPIJobs.
    image = (
        options.nccl_image or settings.get("gpuforge_k8s_verify_nccl_image") or settings.get("gpuforge_workload_image")
    )
    source = utils.SOURCE_MPIJOB
    if not image:
        remedy = (
            "no nccl-tests image: set gpuforge_workload_image (playbooks/workload_image.yml builds it) or "
            "gpuforge_k8s_verify_nccl_image (an image with all_reduce_perf built with MPI=1 and an SSH server, as the "
            "reference MPIJobs need), or pass --nccl-image"
        )
        return [utils.check("mpijob_completed", "mpijob", UNKNOWN, None, None, source, remedy)]
    if not cluster.has_mpijob_crd():
        remedy = (
            f"the API server serves no {MPIJOB_PLURAL}.{MPIJOB_GROUP}/{MPIJOB_VERSION}: install the MPI operator and "
            "its CRD (the mpi_operator add-on, playbooks/k8s_addons.yml with gpuforge_kubeconfig set)"
        )
        observed = {"crd": f"{MPIJOB_PLURAL}.{MPIJOB_GROUP}", "served": False}
        return [utils.check("mpijob_completed", "mpijob", FAIL, observed, {"served": True}, source, remedy)]
    counts = [count for count in plan_.gpu_nodes.values() if count]
    gpus = min(counts) if counts else 1
    body = nccl_mpijob(
        f"gpuforge-verify-nccl-{suffix}", namespace, image, settings, gpus, options.nccl_workers, plan_.rdma
    )
    _write(out / "nccl-mpijob.yaml", yaml.safe_dump(body, sort_keys=False))
    name = body["metadata"]["name"]
    cluster.create_mpijob(body)
    job, finished = waiter.until(
        lambda: cluster.mpijob(namespace, name), utils.mpijob_finished, options.job_timeout, options.poll_interval
    )
    launchers = cluster.pods(namespace, utils.LAUNCHER_SELECTOR.format(name=name)).get("items") or []
    launchers.sort(key=lambda pod: (pod.get("metadata") or {}).get("creationTimestamp") or "")
    nodes = sorted({(pod.get("spec") or {}).get("nodeName") for pod in launchers} - {None})
    checks = [utils.judge_mpijob(job, nodes, None if finished else options.job_timeout)]
    if launchers:
        text = cluster.log(namespace, launchers[-1]["metadata"]["name"])
        _write(out / "nccl-launcher.log", text)
        if checks[0]["verdict"] == PASS:  # a failed or unfinished job's partial output is not judged
            checks += utils.judge_nccl_log(nccl, text, min_busbw_gbyte_per_s, nodes)
    if not options.keep:
        cluster.delete_mpijob(namespace, name)
    return checks


def judge_rdma_pair(server: str, client: str, logs: dict, pods: dict, settings: dict, systems: dict, why: str = ""):
    """The in-pod pair: its ``rdma_pod_port`` checks and its ib_write_bw summary block, judged as the host benchmark
    judges a pair: the link speed of each end (its expected system's port, else the in-pod ibstatus rate) picks the
    gpuforge_expected_ib_write_bw entry (gpuforge_bench_ib_pair_threshold), gpuforge_bench_attribution_floors judges.
    ``logs`` and ``pods``: {"server": ..., "client": ...}. Returns (checks, block)."""
    rdma = _k8s_rdma_test()
    bench = paths.collection_import("plugins.filter.gpuforge_bench")
    port = rdma_test_arguments(settings)["port"]
    splits = {role: rdma.split_log(logs.get(role) or "") for role in ("server", "client")}
    nodes = {"server": server, "client": client}
    checks = [rdma.judge_port(nodes[role], role, pods.get(role), splits[role], port) for role in ("server", "client")]
    link_speeds = settings.get("gpuforge_expected_link_speeds") or {}
    facts = {role: rdma.port_facts(splits[role], port) for role in ("server", "client")}
    links = {
        nodes[role]: bench.ib_port_links(facts[role]["infiniband"], systems.get(nodes[role]) or {}, link_speeds)
        for role in ("server", "client")
    }
    hca = splits["client"]["hca"] or splits["server"]["hca"]
    rates = [
        facts[role]["rate_gbit_per_s"] for role in ("server", "client") if facts[role]["rate_gbit_per_s"] is not None
    ]
    line_rate = min(rates) if rates else None
    sources = (settings.get("gpuforge_bench_threshold_sources") or {}).get("gpuforge_expected_ib_write_bw")
    min_fraction = float(settings.get("gpuforge_bench_ib_min_fraction") or 0.9)
    expected_gbit_per_s = settings.get("gpuforge_bench_ib_expected_gbit_per_s")
    pair = {"server": server, "client": client, "rail": f"{hca}/{port}", "line_rate_gbit_per_s": line_rate}
    threshold = bench.ib_pair_threshold(
        pair,
        links,
        settings.get("gpuforge_expected_ib_write_bw") or {},
        link_speeds,
        min_fraction,
        expected_gbit_per_s,
        sources,
    )
    if not why and not hca:
        why = "no RDMA device in the test pods: " + "; ".join(c["remedy"] for c in checks if c["verdict"] != PASS)
    entry = rdma.pair_entry(server, client, splits, pods, threshold, line_rate, expected_gbit_per_s, port=port, why=why)
    block = bench.attribution_floors(
        [entry],
        baseline="absolute",
        min_fraction=min_fraction,
        median_fraction=float(settings.get("gpuforge_bench_ib_median_fraction") or 0.5),
    )
    return checks, block


def _rdma_test(cluster, options, settings, namespace, out, suffix, waiter, plan_: Plan, run_dir: Path):
    """Run the in-pod RDMA test; returns (checks, bench summary path or None)."""
    utils = _k8s_verify_utils()
    rdma = _k8s_rdma_test()
    if settings.get("rdma_workload_access_rdma_test") is False:
        plan_.notes.append("in-pod RDMA test off (rdma_workload_access_rdma_test: false)")
        return [], None
    nodes = list(settings.get("rdma_workload_access_rdma_test_nodes") or plan_.rdma_nodes)[:2]
    resource = settings.get("rdma_workload_access_rdma_test_resource") or (plan_.rdma[0]["name"] if plan_.rdma else "")
    if len(nodes) < 2 or not resource:
        plan_.notes.append("in-pod RDMA test not run: it needs two RDMA nodes and an RDMA resource")
        return [], None
    image = options.rdma_image or settings.get("rdma_workload_access_rdma_test_image")
    image = image or settings.get("gpuforge_workload_image")
    server_node, client_node = nodes
    names = {"server": f"gpuforge-rdma-test-server-{suffix}", "client": f"gpuforge-rdma-test-client-{suffix}"}
    server = rdma_test_pod(names["server"], "server", server_node, settings, resource, image, namespace=namespace)
    _write(out / "rdma-test-server.yaml", yaml.safe_dump(server, sort_keys=False))
    cluster.create_pod(server)
    pods, logs, why = {}, {}, ""
    listening = rdma.MARKER + "ib_write_bw"
    pods["server"], started = waiter.until(
        lambda: cluster.pod(namespace, names["server"]),
        lambda pod: (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"),
        options.pod_timeout,
        options.poll_interval,
    )
    address = (pods["server"].get("status") or {}).get("podIP")
    if started and (pods["server"].get("status") or {}).get("phase") == "Running" and address:
        # The client connects once the server runs ib_write_bw (its marker line is in the log).
        logs["server"], _ready = waiter.until(
            lambda: cluster.log(namespace, names["server"]), lambda text: listening in text, 60, options.poll_interval
        )
        client = rdma_test_pod(
            names["client"], "client", client_node, settings, resource, image, namespace=namespace,
            server_address=address,
        )  # fmt: skip
        _write(out / "rdma-test-client.yaml", yaml.safe_dump(client, sort_keys=False))
        cluster.create_pod(client)
        pods["client"], client_done = waiter.until(
            lambda: cluster.pod(namespace, names["client"]), utils.pod_finished, options.pod_timeout,
            options.poll_interval,
        )  # fmt: skip
        pods["server"], _server_done = waiter.until(
            lambda: cluster.pod(namespace, names["server"]), utils.pod_finished, 60, options.poll_interval
        )
        for role in ("server", "client"):
            phase = (pods[role].get("status") or {}).get("phase")
            logs[role] = cluster.log(namespace, names[role]) if phase in ("Running", "Succeeded", "Failed") else ""
        if not client_done:
            why = f"the client pod did not finish within {options.pod_timeout}s: " + (
                "; ".join(utils.pod_problems(pods["client"])) or "check that its node offers the RDMA resource"
            )
    else:
        phase = (pods["server"].get("status") or {}).get("phase") or "unknown"
        problems = "; ".join(utils.pod_problems(pods["server"])) or f"phase {phase}"
        why = f"the server pod did not start ib_write_bw on {server_node} within {options.pod_timeout}s: {problems}"
        logs["server"] = cluster.log(namespace, names["server"]) if phase in ("Succeeded", "Failed") else ""
    for role in ("server", "client"):
        _write(out / f"rdma-test-{role}.log", logs.get(role, ""))
    if not options.keep:
        for role in ("server", "client"):
            if role in pods:
                cluster.delete_pod(namespace, names[role])
    checks, block = judge_rdma_pair(server_node, client_node, logs, pods, settings, plan_.systems, why)
    bench_dir = run_dir / "bench" / f"k8s-rdma-{suffix}"
    # Written as summary.yml writes the host benchmark's: the block and its records (the gpuforge_bench_summary
    # filter), which the report and the exports read.
    summary = paths.collection_import("plugins.filter.gpuforge_bench").bench_summary(
        {"run_id": run_dir.name, "nodes": [server_node, client_node], "ib_write_bw": block}
    )
    _write(bench_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    # The pair's files beside it, as the host benchmark writes them (bench/<run>/ib_write_bw/<name>.*).
    name = block["results"][0]["name"]
    _write(bench_dir / "ib_write_bw" / f"{name}.json", json.dumps({"pods": pods}, indent=2) + "\n")
    for role in ("server", "client"):
        _write(bench_dir / "ib_write_bw" / f"{name}.{role}.txt", logs.get(role, ""))
    return checks, bench_dir / "summary.json"


def verify(options: Options, cluster=None, waiter: Waiter | None = None) -> dict:
    """Run every check; returns the verify document (also written to <run dir>/k8s/verify.json)."""
    from gpuforge.runner import new_run_id

    utils = _k8s_verify_utils()
    plan_ = plan(options)
    settings = plan_.variables
    kubeconfig = options.kubeconfig or settings.get("gpuforge_kubeconfig")
    if not kubeconfig:
        raise VerifyError(
            "no kubeconfig: pass --kubeconfig or set gpuforge_kubeconfig in the inventory (post-deploy verification "
            "needs the cluster's API server)"
        )
    cluster = cluster or Cluster(str(kubeconfig), options.context or settings.get("gpuforge_kube_context"))
    waiter = waiter or Waiter()
    run_dir = options.run_dir or paths.ARTIFACTS_DIR / new_run_id()
    run_id = run_dir.name
    out = run_dir / "k8s" / "verify"
    node_list = cluster.nodes()
    _write(out / "nodes.json", json.dumps(node_list, indent=2) + "\n")
    checks = utils.judge_gpu_allocatable(node_list, {k: v for k, v in plan_.gpu_nodes.items() if v is not None})
    checks += [
        utils.check(
            "gpu_allocatable",
            "node",
            UNKNOWN,
            None,
            None,
            utils.SOURCE_GPU,
            "set gpuforge_expected_system (or gpuforge_expected_gpu_count) for this node",
            node=name,
        )
        for name, count in sorted(plan_.gpu_nodes.items())
        if count is None
    ]
    if plan_.rdma_nodes:
        checks += utils.judge_rdma_allocatable(node_list, plan_.rdma_nodes, plan_.rdma)
    bench_summaries: list = []
    if not options.skip_workloads:
        namespaces = settings.get("rdma_workload_access_namespaces") or []
        namespace = options.namespace or settings.get("gpuforge_k8s_verify_namespace") or next(iter(namespaces), None)
        if not namespace:
            raise VerifyError(
                "no namespace for the verification pods: pass --namespace or set rdma_workload_access_namespaces "
                "(its namespaces grant the mpi ServiceAccount IPC_LOCK)"
            )
        cluster.namespace(namespace)
        suffix = uuid.uuid4().hex[:6]
        checks += _vector_add(cluster, options, settings, namespace, out, suffix, waiter)
        if plan_.rdma_nodes:
            rdma_checks, bench_summary = _rdma_test(
                cluster, options, settings, namespace, out, suffix, waiter, plan_, run_dir
            )
            checks += rdma_checks
            if bench_summary:
                bench_summaries.append(str(bench_summary.relative_to(run_dir)))
        checks += _mpijob(cluster, options, settings, namespace, out, suffix, waiter, plan_)
    checked_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {
        "written_by": WRITTEN_BY,
        "schema_version": _records_module.SCHEMA_VERSION,
        "run_id": run_id,
        "checked_at": checked_at,
        "server": cluster.server,
        "inventory": str(options.inventory),
        "notes": plan_.notes,
        # The judges' k8s_check records, stamped with this run and time: what the report and exports read.
        "records": [dict(record, run_id=run_id, checked_at=checked_at) for record in checks],
        # Benchmark results of this run (the in-pod ib_write_bw pair), in the host benchmark's summary.json shape.
        "bench_summaries": bench_summaries,
    }
    _write(run_dir / "k8s" / "verify.json", json.dumps(document, indent=2) + "\n")
    document["path"] = str(run_dir / "k8s" / "verify.json")
    return document


def main(args) -> int:
    """The `gpuforge k8s verify` handler: 0 when nothing failed, 1 on a failed check, 2 when it could not run."""
    options = Options(
        inventory=Path(args.inventory).resolve(),
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        rendered=Path(args.rendered) if args.rendered else None,
        vector_add_image=args.vector_add_image,
        nccl_image=args.nccl_image,
        nccl_workers=args.nccl_workers,
        rdma_image=args.rdma_image,
        min_busbw_gbyte_per_s=args.min_busbw_gbyte_per_s,
        pod_timeout=args.pod_timeout,
        job_timeout=args.job_timeout,
        poll_interval=args.poll_interval,
        skip_workloads=args.skip_workloads,
        keep=args.keep,
        run_dir=Path(args.run_dir) if args.run_dir else None,
    )
    try:
        document = verify(options)
    except VerifyError as exc:
        print(f"gpuforge k8s verify: {exc}", file=sys.stderr)
        return 2
    failed = [record for record in document["records"] if record["verdict"] == FAIL]
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        for record in document["records"]:
            where = record["node"] or ",".join(record["nodes"]) or record["subject"]
            print(f"{record['verdict']:<8} {record['check']:<18} {where}")
            if record["verdict"] != PASS and record["remedy"]:
                print(f"         {record['remedy']}")
        for note in document["notes"]:
            print(f"note: {note}")
        for path in document["bench_summaries"]:
            print(f"in-pod ib_write_bw: {Path(document['path']).parent.parent / path}")
        print(f"k8s verify: {len(failed)} failed of {len(document['records'])} checks; {document['path']}")
    return 1 if failed else 0


def add_verify_parser(k8s_commands, default_inventory: str) -> None:
    """`gpuforge k8s verify` and its options (src/gpuforge/cli.py registers it under `gpuforge k8s`)."""
    verify_cmd = k8s_commands.add_parser(
        "verify",
        help="check a deployed cluster: GPUs and RDMA resources allocatable, a CUDA pod, in-pod RDMA, an NCCL MPIJob",
        description=__doc__.split("\n\n")[0],
    )
    verify_cmd.add_argument("-i", "--inventory", default=default_inventory, help="inventory (expected hardware)")
    verify_cmd.add_argument(
        "--kubeconfig", help="kubeconfig of the cluster (default: the inventory's gpuforge_kubeconfig)"
    )
    verify_cmd.add_argument("--context", help="kubeconfig context (default: gpuforge_kube_context, else the current)")
    verify_cmd.add_argument(
        "--rendered", help="folder of 'gpuforge k8s render' output holding <cluster>/ (default artifacts/k8s)"
    )
    verify_cmd.add_argument(
        "--namespace", help="namespace of the test pods (default: the first of rdma_workload_access_namespaces)"
    )
    verify_cmd.add_argument("--vector-add-image", help="CUDA vectorAdd image (gpuforge_k8s_verify_vector_add_image)")
    verify_cmd.add_argument("--nccl-image", help="image with nccl-tests and sshd (gpuforge_k8s_verify_nccl_image)")
    verify_cmd.add_argument(
        "--rdma-image", help="image of the in-pod RDMA test (rdma_workload_access_rdma_test_image: the workload image)"
    )
    verify_cmd.add_argument("--nccl-workers", type=int, default=2, help="MPIJob worker pods (default 2)")
    verify_cmd.add_argument(
        "--min-busbw-gbyte-per-s", type=float, help="GB/s (default: gpuforge_bench_nccl_min_busbw_gbyte_per_s)"
    )
    verify_cmd.add_argument("--pod-timeout", type=float, default=300, help="seconds for the CUDA pod (default 300)")
    verify_cmd.add_argument("--job-timeout", type=float, default=1800, help="seconds for the MPIJob (default 1800)")
    verify_cmd.add_argument("--poll-interval", type=float, default=5, help="seconds between status reads (default 5)")
    verify_cmd.add_argument(
        "--skip-workloads", action="store_true", help="only the allocatable checks: no pod, no MPIJob"
    )
    verify_cmd.add_argument("--keep", action="store_true", help="leave the test pod and MPIJob in the cluster")
    verify_cmd.add_argument("--run-dir", help="run directory to write k8s/verify.json into (default: a new one)")
    verify_cmd.add_argument("--json", action="store_true", help="print the verify document as JSON")
    verify_cmd.set_defaults(handler=main)
