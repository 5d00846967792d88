"""`gpuforge k8s verify` end to end against a fake API server serving recorded responses.

No Kubernetes API server can run here. A local HTTPS server on 127.0.0.1 (a CA, a server and a client certificate
made for each test session) answers the requests the kubernetes client makes with the recorded responses of
tests/fixtures/k8s/api/ (SOURCES.md), so the real client path runs: kubeconfig loading, TLS with the kubeconfig's
CA, bearer-token and client-certificate authentication, JSON and plain-text (pod log) bodies, HTTP errors.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from ansible_collections.gpuforge.cluster.plugins.module_utils import gpuforge_records as records
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_k8s_structural import (
    check_object,
    embedded_pod_templates,
)
from bench_summaries import schema_validator

from gpuforge import cli, k8s_verify
from gpuforge.report import export

ROOT = Path(__file__).resolve().parents[3]
API = ROOT / "tests" / "fixtures" / "k8s" / "api"
SEED_2X8_LOG = ROOT / "tests" / "fixtures" / "nccl-tests" / "redp5610_ex4-2_2x8xv100_ib_legacy.txt"
INVENTORY = API / "inventory" / "hosts.yml"
RENDERED = API / "rendered"
TOKEN = "recorded-test-token"
NS = "gpuforge-bench"


# -- certificates -------------------------------------------------------------------------------------------------


def _pem_pair(key, cert):
    from cryptography.hazmat.primitives import serialization

    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def _certificate(name, issuer_name, issuer_key, key, *, ca=False, san=None, client=False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # Key identifiers, as a cluster's CA (kubeadm, OpenShift) writes them: Python 3.13's default TLS context
        # checks certificates strictly (ssl.VERIFY_X509_STRICT, "What's New In Python 3.13", ssl) and refuses a
        # CA-issued certificate without an Authority Key Identifier (the Debian 13 Python of make unit-newest).
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    if not ca:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    ca: bytes
    server_key: bytes
    server_cert: bytes
    client_key: bytes
    client_cert: bytes
    other_ca: bytes


@pytest.fixture(scope="session")
def pki() -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    keys = [ec.generate_private_key(ec.SECP256R1()) for _ in range(4)]
    ca_key, server_key, client_key, other_key = keys
    ca = _certificate("gpuforge-test-ca", "gpuforge-test-ca", ca_key, ca_key, ca=True)
    other = _certificate("another-ca", "another-ca", other_key, other_key, ca=True)
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = _certificate("kube-apiserver", "gpuforge-test-ca", ca_key, server_key, san=san)
    client = _certificate("gpuforge-verify", "gpuforge-test-ca", ca_key, client_key, client=True)
    server_key_pem, server_pem = _pem_pair(server_key, server)
    client_key_pem, client_pem = _pem_pair(client_key, client)
    return Pki(
        _pem_pair(ca_key, ca)[1], server_key_pem, server_pem, client_key_pem, client_pem, _pem_pair(ca_key, other)[1]
    )


# -- the fake API server ------------------------------------------------------------------------------------------


@dataclass
class Route:
    method: str
    pattern: str
    responses: list  # (status, file name or bytes); the last one repeats
    hits: int = 0

    def next(self):
        response = self.responses[min(self.hits, len(self.responses) - 1)]
        self.hits += 1
        return response


@dataclass
class FakeApi:
    routes: list
    requests: list = field(default_factory=list)

    def find(self, method, path):
        for route in self.routes:
            if route.method == method and re.fullmatch(route.pattern, path):
                return route
        return None

    def sent(self, method, pattern):
        return [req for req in self.requests if req["method"] == method and re.fullmatch(pattern, req["path"])]


def _handler(api: FakeApi, token: str | None):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest output clean
            pass

        def _serve(self, method):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
            api.requests.append(
                {
                    "method": method,
                    "path": path,
                    "query": query,
                    "authorization": self.headers.get("Authorization"),
                    "client_cert": bool(peer),
                    "body": json.loads(body) if body else None,
                }
            )
            authorized = bool(peer) if token is None else self.headers.get("Authorization") == f"Bearer {token}"
            route = api.find(method, path)
            if not authorized:
                status, source = 401, "status-401.json"
            elif route is None:
                status, source = 404, "status-404.json"
            else:
                status, source = route.next()
            data = source if isinstance(source, bytes) else (API / source).read_bytes()
            self.send_response(status)
            kind = "application/json" if data.lstrip().startswith(b"{") else "text/plain"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def do_DELETE(self):
            self._serve("DELETE")

    return Handler


@pytest.fixture
def serve(pki, tmp_path):
    """serve(routes) -> (FakeApi, kubeconfig path with TOKEN or a client certificate); stopped after the test.

    token: the bearer token the server accepts; client_cert: accept the client certificate instead; ca: the CA the
    kubeconfig trusts (default the one that signed the server's certificate).
    """
    servers = []

    def start(routes, token=TOKEN, client_cert=False, ca=None):
        api = FakeApi(routes)
        (tmp_path / "server.key").write_bytes(pki.server_key)
        (tmp_path / "server.crt").write_bytes(pki.server_cert)
        (tmp_path / "ca.crt").write_bytes(pki.ca)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
        context.load_verify_locations(tmp_path / "ca.crt")
        context.verify_mode = ssl.CERT_OPTIONAL
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api, None if client_cert else token))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"https://127.0.0.1:{server.server_address[1]}"
        return api, write_kubeconfig(tmp_path, url, ca or pki.ca, pki if client_cert else None)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def write_kubeconfig(folder: Path, url: str, ca: bytes, pki: Pki | None = None, token: str = TOKEN) -> Path:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    user = (
        {"client-certificate-data": b64(pki.client_cert), "client-key-data": b64(pki.client_key)}
        if pki
        else {"token": token}
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "recorded", "cluster": {"server": url, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": "verifier", "user": user}],
        "contexts": [{"name": "recorded", "context": {"cluster": "recorded", "user": "verifier"}}],
        "current-context": "recorded",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


POD = rf"/api/v1/namespaces/{NS}/pods/gpuforge-vector-add-[0-9a-f]{{6}}"
MPIJOB = rf"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs/gpuforge-verify-nccl-[0-9a-f]{{6}}"
LAUNCHER_LOG = rf"/api/v1/namespaces/{NS}/pods/gpuforge-verify-nccl-recorded-launcher-x2v7q/log"
RDMA_SERVER = rf"/api/v1/namespaces/{NS}/pods/gpuforge-rdma-test-server-[0-9a-f]{{6}}"
RDMA_CLIENT = rf"/api/v1/namespaces/{NS}/pods/gpuforge-rdma-test-client-[0-9a-f]{{6}}"
HOST_BENCH = ROOT / "tests" / "fixtures" / "records" / "demo-run" / "benchmark" / "bench" / "20261126T151133Z"


def cluster_routes(
    nodes="nodes-healthy.json",
    pods=("pod-vector-add-pending.json", "pod-vector-add-succeeded.json"),
    pod_log="log-vector-add-passed.txt",
    jobs=("mpijob-running.json", "mpijob-succeeded.json"),
    crd=(200, "apis-kubeflow.org-v2beta1.json"),
    namespace=(200, "namespace.json"),
    rdma_server=(
        "pod-rdma-test-server-pending.json",
        "pod-rdma-test-server-running.json",
        "pod-rdma-test-server-succeeded.json",
    ),
    rdma_client=("pod-rdma-test-client-succeeded.json",),
    rdma_logs=("log-rdma-test-server.txt", "log-rdma-test-client.txt"),
):
    return [
        Route("GET", RDMA_SERVER, [(200, name) for name in rdma_server]),
        Route("GET", RDMA_SERVER + "/log", [(200, rdma_logs[0])]),
        Route("DELETE", RDMA_SERVER, [(200, rdma_server[-1])]),
        Route("GET", RDMA_CLIENT, [(200, name) for name in rdma_client]),
        Route("GET", RDMA_CLIENT + "/log", [(200, rdma_logs[1])]),
        Route("DELETE", RDMA_CLIENT, [(200, rdma_client[-1])]),
        Route("GET", "/api/v1/nodes", [(200, nodes)]),
        Route("GET", f"/api/v1/namespaces/{NS}", [namespace]),
        Route("POST", f"/api/v1/namespaces/{NS}/pods", [(201, pods[0])]),
        Route("GET", POD, [(200, name) for name in pods]),
        Route("GET", POD + "/log", [(200, pod_log)]),
        Route("DELETE", POD, [(200, pods[-1])]),
        Route("GET", "/apis/kubeflow.org/v2beta1", [crd]),
        Route("POST", f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs", [(201, jobs[0])]),
        Route("GET", MPIJOB, [(200, name) for name in jobs]),
        Route("GET", f"/api/v1/namespaces/{NS}/pods", [(200, "pods-launcher.json")]),
        Route("GET", LAUNCHER_LOG, [(200, SEED_2X8_LOG.read_bytes())]),
        Route("DELETE", MPIJOB, [(200, jobs[-1])]),
    ]


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run(kubeconfig, tmp_path, **changes):
    options = k8s_verify.Options(
        inventory=INVENTORY,
        kubeconfig=str(kubeconfig),
        rendered=RENDERED,
        run_dir=tmp_path / "run",
        poll_interval=5,
        pod_timeout=60,
        job_timeout=600,
        **changes,
    )
    clock = FakeClock()
    return k8s_verify.verify(options, waiter=k8s_verify.Waiter(clock.clock, clock.sleep))


def by_check(document):
    result = {}
    for check in document["records"]:
        result.setdefault(check["check"], []).append(check)
    return result


def test_a_healthy_cluster_passes_every_check(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes())
    document = run(kubeconfig, tmp_path)
    statuses = {(c["check"], c["node"]): c["verdict"] for c in document["records"]}
    assert statuses == {
        ("gpu_allocatable", "dgx01"): "PASS",
        ("gpu_allocatable", "dgx02"): "PASS",
        ("rdma_allocatable", "dgx01"): "PASS",
        ("rdma_allocatable", "dgx02"): "PASS",
        ("cuda_vector_add", "dgx01"): "PASS",
        ("rdma_pod_port", "dgx02"): "PASS",
        ("rdma_pod_port", "dgx01"): "PASS",
        ("mpijob_completed", None): "PASS",
        ("nccl_busbw", None): "PASS",
        ("nccl_wrong_values", None): "PASS",
        ("nccl_transport", None): "PASS",
    }
    busbw = by_check(document)["nccl_busbw"][0]
    assert (busbw["observed"], busbw["threshold"]["expected"]) == (55.22, ">= 40.0 GB/s")  # the inventory's threshold
    # Every request carried the kubeconfig's token; the pod was polled until it finished, then deleted.
    assert {req["authorization"] for req in api.requests} == {f"Bearer {TOKEN}"}
    assert len(api.sent("GET", POD)) == 2
    assert len(api.sent("DELETE", POD)) == 1
    assert len(api.sent("DELETE", MPIJOB)) == 1
    selector = api.sent("GET", f"/api/v1/namespaces/{NS}/pods")[0]["query"]
    assert "training.kubeflow.org%2Fjob-role%3Dlauncher" in selector


def test_the_submitted_objects_are_the_rendered_templates_and_pass_their_schemas(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes())
    run(kubeconfig, tmp_path)
    pod = api.sent("POST", f"/api/v1/namespaces/{NS}/pods")[0]["body"]
    assert pod["spec"]["containers"][0]["image"] == k8s_verify.DEFAULT_VECTOR_ADD_IMAGE
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    kubernetes_validate.validate(pod, "1.30", strict=True)
    job = api.sent("POST", f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs")[0]["body"]
    assert check_object(job) == []
    for template in embedded_pod_templates(job):
        kubernetes_validate.validate(template, "1.30", strict=True)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 8, **{f"rdma/shared_ib{i}": 1 for i in range(4)}}
    assert worker["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["image"] == "registry.example/nccl-tests:2.13.9-sshd"
    assert launcher["command"][launcher["command"].index("-np") + 1] == "16"
    assert "/opt/nccl-tests/build/all_reduce_perf" in launcher["command"]
    assert (tmp_path / "run" / "k8s" / "verify" / "nccl-launcher.log").read_bytes() == SEED_2X8_LOG.read_bytes()


def test_the_run_directory_gets_schema_valid_k8s_check_records(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes(nodes="nodes-faulty.json"))
    run(kubeconfig, tmp_path)
    written = json.loads((tmp_path / "run" / "k8s" / "verify.json").read_text(encoding="utf-8"))
    assert written["run_id"] == "run"
    built = records.k8s_check_records(written)
    schema = json.loads((ROOT / "schemas" / "k8s-check.schema.json").read_text(encoding="utf-8"))
    for record in built:
        jsonschema.Draft202012Validator(schema).validate(record)
    assert records.node_verdicts(built)["dgx02"]["verdict"] == "FAIL"
    # gpuforge export reads the same file from the run directory: dgx02 is drained, its checks are JUnit cases.
    verdicts = json.loads(export.export(tmp_path / "run", "verdicts"))
    dgx02 = next(node for node in verdicts["nodes"] if node["node"] == "dgx02")
    assert dgx02["verdict"] == "FAIL" and dgx02["actions"]["slurm"]["state"] == "DRAIN"
    junit = export.export(tmp_path / "run", "junit")
    assert 'testsuite name="kubernetes checks"' in junit
    assert '<testcase classname="dgx02" name="gpu_allocatable"' in junit


def test_fewer_gpus_and_a_missing_rdma_resource_fail_their_node(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes(nodes="nodes-faulty.json"))
    document = run(kubeconfig, tmp_path, skip_workloads=True)
    failed = {(c["check"], c["node"]) for c in document["records"] if c["verdict"] == "FAIL"}
    assert failed == {("gpu_allocatable", "dgx02"), ("rdma_allocatable", "dgx02")}
    assert not api.sent("POST", f"/api/v1/namespaces/{NS}/pods")  # --skip-workloads submits nothing


def test_a_failing_vector_add_pod_fails_its_check(serve, tmp_path):
    routes = cluster_routes(
        pods=("pod-vector-add-pending.json", "pod-vector-add-failed.json"), pod_log="log-vector-add-failed.txt"
    )
    _, kubeconfig = serve(routes)
    check = by_check(run(kubeconfig, tmp_path))["cuda_vector_add"][0]
    assert check["verdict"] == "FAIL"
    assert check["observed"]["phase"] == "Failed"
    log = (tmp_path / "run" / "k8s" / "verify" / "cuda-vector-add.log").read_text(encoding="utf-8")
    assert "no CUDA-capable device is detected" in log


def test_a_vector_add_pod_that_stays_pending_times_out_and_is_deleted(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes(pods=("pod-vector-add-unschedulable.json",)))
    check = by_check(run(kubeconfig, tmp_path))["cuda_vector_add"][0]
    assert check["verdict"] == "FAIL"
    assert "within 60s" in check["remedy"]
    assert "Insufficient nvidia.com/gpu" in check["remedy"]
    assert len(api.sent("GET", POD)) == 1 + 60 // 5  # first read, then every poll interval until the timeout
    assert not api.sent("GET", POD + "/log")  # never started: no log to read
    assert len(api.sent("DELETE", POD)) == 1


def test_a_failed_mpijob_fails_and_its_log_is_not_judged(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes(jobs=("mpijob-running.json", "mpijob-failed.json")))
    checks = by_check(run(kubeconfig, tmp_path))
    assert checks["mpijob_completed"][0]["verdict"] == "FAIL"
    assert "nccl_busbw" not in checks


def test_a_slow_busbw_fails_against_the_threshold(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes())
    busbw = by_check(run(kubeconfig, tmp_path, min_busbw_gbyte_per_s=80.0))["nccl_busbw"][0]
    assert busbw["verdict"] == "FAIL"
    assert busbw["observed"] == 55.22


def test_a_missing_mpijob_crd_fails_the_mpijob_check_with_the_fix(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes(crd=(404, "status-404.json")))
    check = by_check(run(kubeconfig, tmp_path))["mpijob_completed"][0]
    assert check["verdict"] == "FAIL"
    assert "install the MPI operator" in check["remedy"]
    assert not api.sent("POST", f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs")


def test_a_client_certificate_kubeconfig_authenticates(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes(), client_cert=True)
    document = run(kubeconfig, tmp_path, skip_workloads=True)
    assert {c["verdict"] for c in document["records"]} == {"PASS"}
    assert all(req["client_cert"] and req["authorization"] is None for req in api.requests)


def test_a_rejected_token_is_a_clear_error(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes(), token="the-server-wants-this-one")
    with pytest.raises(k8s_verify.VerifyError, match="401 Unauthorized; the token or client certificate was rejected"):
        run(kubeconfig, tmp_path)


def test_a_server_certificate_from_another_ca_is_a_clear_error(serve, pki, tmp_path):
    _, kubeconfig = serve(cluster_routes(), ca=pki.other_ca)
    with pytest.raises(k8s_verify.VerifyError, match="certificate-authority-data"):
        run(kubeconfig, tmp_path)


def test_an_unreachable_api_server_is_a_clear_error(pki, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path, f"https://127.0.0.1:{port}", pki.ca)
    with pytest.raises(
        k8s_verify.VerifyError, match=r"cannot reach the API server https://127\.0\.0\.1:\d+ \(list nodes\)"
    ):
        run(kubeconfig, tmp_path)


def test_a_missing_namespace_is_a_clear_error(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes(namespace=(404, "status-404-namespace.json")))
    with pytest.raises(k8s_verify.VerifyError, match=r"namespace gpuforge-bench does not exist.*rdma_workload_access"):
        run(kubeconfig, tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n", "Expected key current-context"),
        ("{this is: [not yaml", "is not a valid kubeconfig"),
    ],
)
def test_a_bad_kubeconfig_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "kubeconfig"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(k8s_verify.VerifyError, match=message):
        run(path, tmp_path)


def test_a_context_the_kubeconfig_lacks_names_the_option(pki, tmp_path):
    kubeconfig = write_kubeconfig(tmp_path, "https://127.0.0.1:6443", pki.ca)
    with pytest.raises(k8s_verify.VerifyError, match=r"\(context staging\) cannot be used.*--context"):
        run(kubeconfig, tmp_path, context="staging")


def test_a_missing_kubeconfig_names_the_option(tmp_path):
    with pytest.raises(k8s_verify.VerifyError, match="does not exist: pass --kubeconfig"):
        run(tmp_path / "nowhere", tmp_path)


def test_the_cli_exits_0_1_and_2(serve, tmp_path, capsys):
    _, good = serve(cluster_routes())
    common = ["k8s", "verify", "-i", str(INVENTORY), "--rendered", str(RENDERED), "--skip-workloads"]
    assert cli.main([*common, "--kubeconfig", str(good), "--run-dir", str(tmp_path / "a")]) == 0
    assert "0 failed of 4 checks" in capsys.readouterr().out
    _, faulty = serve(cluster_routes(nodes="nodes-faulty.json"))
    assert cli.main([*common, "--kubeconfig", str(faulty), "--run-dir", str(tmp_path / "b"), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert sum(check["verdict"] == "FAIL" for check in document["records"]) == 2
    assert cli.main([*common, "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "pass --kubeconfig" in capsys.readouterr().err


def test_rdma_resources_come_from_the_rendered_configmap_or_the_nicclusterpolicy(tmp_path):
    assert [r["name"] for r in k8s_verify.rendered_rdma(RENDERED, "verify-test")] == [
        f"rdma/shared_ib{i}" for i in range(4)
    ]
    folder = tmp_path / "ocp" / "openshift_gpu_operators"
    folder.mkdir(parents=True)
    config = {"configList": [{"resourceName": "shared_roce0", "rdmaHcaMax": 63, "selectors": {"ifNames": ["ens224"]}}]}
    policy = {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {"rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin", "config": json.dumps(config)}},
    }
    (folder / "nicclusterpolicy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    assert k8s_verify.rendered_rdma(tmp_path, "ocp") == [{"name": "rdma/shared_roce0", "hca_max": 63}]
    with pytest.raises(k8s_verify.VerifyError, match="render the add-ons first"):
        k8s_verify.rendered_rdma(tmp_path, "nothing-rendered")


# -- the in-pod RDMA test ------------------------------------------------------------------------------------------


def bench_summary(tmp_path):
    (path,) = sorted((tmp_path / "run" / "bench").glob("k8s-rdma-*/summary.json"))
    return json.loads(path.read_text(encoding="utf-8")), path


def test_the_rdma_pods_are_the_role_template_on_two_nodes_with_ipc_lock_and_one_rdma_resource(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes())
    run(kubeconfig, tmp_path)
    created = [req["body"] for req in api.sent("POST", f"/api/v1/namespaces/{NS}/pods")]
    server, client = (next(p for p in created if p["metadata"]["labels"].get("gpuforge.io/rdma-test-role") == role)
                      for role in ("server", "client"))  # fmt: skip
    for pod, node in ((server, "dgx02"), (client, "dgx01")):
        kubernetes_validate.validate(pod, "1.30", strict=True)
        assert pod["spec"]["serviceAccountName"] == "mpi"  # rdma_workload_access's grant
        container = pod["spec"]["containers"][0]
        assert container["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
        assert "privileged" not in container["securityContext"]
        assert container["resources"]["limits"] == {"rdma/shared_ib1": 1}
        assert container["image"] == "registry.example/gpuforge/workload:1.0.0"
        (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term == {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    # The client is created after the server runs, and connects to the server pod's IP.
    script = client["spec"]["containers"][0]["command"][2]
    assert script.rstrip().endswith('exec ib_write_bw -d "$hca" -i 1 -p 18515 -D 5 -s 65536 -q 1 -F 10.244.12.41')
    assert "-F 10.244" not in server["spec"]["containers"][0]["command"][2]
    order = [req["path"] for req in api.requests if req["method"] == "POST" and req["path"].endswith("/pods")]
    assert len(order) == 3  # vector add, server, client
    assert len(api.sent("DELETE", RDMA_SERVER)) == len(api.sent("DELETE", RDMA_CLIENT)) == 1


def test_the_in_pod_pair_is_judged_by_the_host_threshold_table_and_written_as_its_summary(serve, tmp_path):
    _, kubeconfig = serve(cluster_routes())
    document = run(kubeconfig, tmp_path)
    summary, path = bench_summary(tmp_path)
    schema_validator("bench-summary.schema.json").validate(summary)
    assert document["bench_summaries"] == [str(path.relative_to(tmp_path / "run"))]
    (result,) = summary["ib_write_bw"]["results"]
    # Written with its record, as summary.yml writes the host pairs'; the report reads that record as it is.
    (record,) = summary["records"]
    assert (record["kind"], record["name"], record["verdict"]) == ("benchmark_run", result["name"], "PASS")
    assert records.bench_summary_records(summary) == summary["records"]
    # dgx1-v100-edr's mlx5_1 port is EDR: gpuforge_expected_ib_write_bw EDR 11,000 MB/sec (IBM Redpaper REDP-5610),
    # the host benchmark's floor; IBM Redpaper REDP-5610's in-pod run averaged 11,264.11 MB/sec = 94.49 Gb/s.
    assert (result["value"], result["threshold"], result["min_mib_per_s"]) == (94.49, 92.27, 11000.0)
    assert result["verdict"] == "PASS" and result["link_speed"] == "EDR"
    assert result["threshold_source"].startswith("IBM Redpaper REDP-5610")
    assert (result["nodes"], result["rail"], result["name"]) == (
        ["dgx02", "dgx01"],
        "mlx5_1/1",
        "pod-dgx02__dgx01__mlx5_1",
    )
    assert (
        (path.parent / "ib_write_bw" / "pod-dgx02__dgx01__mlx5_1.client.txt")
        .read_text()
        .endswith((API / "log-rdma-test-client.txt").read_text())
    )


def test_the_in_pod_pair_is_the_same_record_kind_as_a_host_pair_and_shows_in_the_report(serve, tmp_path):
    from gpuforge.report import html, model

    _, kubeconfig = serve(cluster_routes())
    run(kubeconfig, tmp_path)
    pod_records = [r for r in export.load_records(tmp_path / "run") if r["kind"] == "benchmark_run"]
    host_summary = json.loads((HOST_BENCH / "summary.json").read_text(encoding="utf-8"))
    host_records = [
        r
        for r in records.bench_summary_records(host_summary)
        if r["kind"] == "benchmark_run" and r["benchmark"] == "ib_write_bw"
    ]
    (pod,) = pod_records
    assert (pod["kind"], pod["benchmark"]) == ("benchmark_run", "ib_write_bw")
    assert set(pod) == set(host_records[0]) and set(pod["threshold"]) == set(host_records[0]["threshold"])
    schema = json.loads((ROOT / "schemas" / "benchmark-run.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(pod)
    assert (pod["verdict"], pod["link"], pod["observed"]["value"]) == ("PASS", "dgx02__dgx01__mlx5_1", 94.49)
    # The report reads it as it reads the host pairs: the ib_write_bw series and the per-rail chart.
    data = model.load(tmp_path / "run")
    assert [(bw.host, bw.hca, bw.bw_gbit_per_s) for bw in data.ib_write_bw] == [("dgx02->dgx01", "mlx5_1", 94.49)]
    assert "ib_write_bw on mlx5_1" in html.charts_section(data, [])


def test_an_rdma_pod_without_locked_memory_fails_the_pair_and_flags_both_nodes(serve, tmp_path):
    routes = cluster_routes(
        rdma_client=("pod-rdma-test-client-failed.json",),
        rdma_logs=("log-rdma-test-server.txt", "log-rdma-test-client-no-memlock.txt"),
    )
    _, kubeconfig = serve(routes)
    run(kubeconfig, tmp_path)
    (result,) = bench_summary(tmp_path)[0]["ib_write_bw"]["results"]
    assert (result["value"], result["verdict"], result["run_failed"]) == (None, "FAIL", True)
    assert "Couldn't allocate MR" in result["reason"] and "memlock" in result["reason"]
    built = [r for r in export.load_records(tmp_path / "run") if r["kind"] == "benchmark_run"]
    assert built[0]["verdict"] == "FAIL"
    # As for a host pair: a failed link between two nodes does not say which end is at fault, a warning on each.
    verdicts = records.node_verdicts(export.load_records(tmp_path / "run"))
    assert verdicts["dgx01"]["verdict"] == verdicts["dgx02"]["verdict"] == "WARN"
    assert "ib_write_bw: slow link pod-dgx02__dgx01__mlx5_1" in [r["what"] for r in verdicts["dgx01"]["reasons"]]


def test_an_unschedulable_rdma_server_is_a_failed_pair_and_no_client_is_created(serve, tmp_path):
    api, kubeconfig = serve(cluster_routes(rdma_server=("pod-rdma-test-server-unschedulable.json",)))
    checks = by_check(run(kubeconfig, tmp_path))
    assert not api.sent("GET", RDMA_CLIENT)
    summary = bench_summary(tmp_path)[0]
    (result,) = summary["ib_write_bw"]["results"]
    assert (result["verdict"], result["run_failed"]) == ("FAIL", True)
    assert "within 60s" in result["reason"] and "Insufficient rdma/shared_ib1" in result["reason"]
    # No pod ran, so no line rate was read: the record is written all the same, without the chart's reference line.
    assert result["line_rate_gbit_per_s"] is None
    record = records.bench_summary_records(summary)[0]
    assert (record["kind"], record["verdict"], record["run_failed"]) == ("benchmark_run", "FAIL", True)
    assert "line_rate" not in record["threshold"]
    schema_validator("bench-summary.schema.json").validate(summary)
    assert {c["node"]: c["verdict"] for c in checks["rdma_pod_port"]} == {"dgx02": "FAIL", "dgx01": "FAIL"}
    assert len(api.sent("DELETE", RDMA_SERVER)) == 1


def test_a_slower_pair_than_the_table_is_slow():
    logs = {role: (API / f"log-rdma-test-{role}.txt").read_text() for role in ("server", "client")}
    pods = {
        role: json.loads((API / f"pod-rdma-test-{role}-succeeded.json").read_text()) for role in ("server", "client")
    }
    settings = {
        "gpuforge_expected_ib_write_bw": {"EDR": {"min_mib_per_s": 12000}},
        "gpuforge_expected_link_speeds": {"EDR": {"rate_gbit_per_s": 100, "link_layer": "InfiniBand"}},
    }
    systems = {"dgx01": {}, "dgx02": {}}  # no expected system: the link speed comes from the pods' ibstatus rate
    checks, block = k8s_verify.judge_rdma_pair("dgx02", "dgx01", logs, pods, settings, systems)
    (result,) = block["results"]
    assert (result["verdict"], result["threshold"], result["link_speed"]) == ("FAIL", 100.66, "EDR")
    assert "(no source recorded: a site value)" in result["threshold_source"]
    assert [link["nodes"] for link in block["slow_links"]] == [["dgx02", "dgx01"]]
    assert {c["verdict"] for c in checks} == {"PASS"}


def test_the_verification_mpijob_defaults_to_the_workload_image_and_its_sshd_entry_point(tmp_path):
    plan = k8s_verify.plan(k8s_verify.Options(inventory=INVENTORY, rendered=RENDERED))
    settings = {**plan.variables, "gpuforge_k8s_verify_nccl_image": None}
    image = settings["gpuforge_workload_image"]
    assert image == "registry.example.invalid/gpuforge/workload:1.0.0"  # roles/gpuforge/defaults/main/k8s.yml
    job = k8s_verify.nccl_mpijob("j", NS, image, settings, 8, 2, plan.rdma)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert (worker["image"], worker["command"]) == (image, ["/usr/local/sbin/start-sshd"])
    other = k8s_verify.nccl_mpijob("j", NS, "registry.example/nccl-tests:2.13.9-sshd", settings, 8, 2, plan.rdma)
    assert other["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] == [
        "/usr/sbin/sshd",
        "-De",
    ]
