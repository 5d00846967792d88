"""apptainer on a lab node: the pinned release installed from the verified release file, apptainer.conf bind paths
for the inventory's shared file systems, and `apptainer exec --nv` (the lab's simulator) seeing the node's GPUs."""

from gpuforge import vendor_facts

VERSION = "1.5.3"
# The release file each OS family installs (vendor_facts/apptainer/{deb,rpm}.yml file_names).
FILES = {"debian12": f"apptainer_{VERSION}_amd64.deb", "rhel9": f"apptainer-{VERSION}-1.x86_64.rpm"}
SUMS_URL = f"http://mirror/apptainer/releases/download/v{VERSION}/SHA256SUMS"
IMAGE = "/opt/gpuforge-lab/images/cuda.sandbox"
SHARED = ["/shared/home", "/shared/apps", "/gpfs/ess3000_4M"]


def _mirror_sums(host) -> dict:
    text = host.check_output(
        f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{SUMS_URL}').read().decode())\""
    )
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line.strip())}


def _shape(host) -> str:
    return "rhel9" if host.backend.get_hostname().endswith("-rhel9") else "debian12"


def test_pinned_release_installed_from_the_downloaded_file(host):
    package = host.package("apptainer")
    assert package.is_installed
    assert not host.package("apptainer-suid").is_installed
    assert host.check_output("apptainer --version") == f"apptainer version {VERSION}"
    assert host.check_output("apptainer version") == VERSION
    if _shape(host) == "rhel9":
        # dnf installed the release's RPM from the downloaded file.
        assert host.check_output("rpm -q --qf '%{VERSION}-%{RELEASE}' apptainer") == f"{VERSION}-1"
    else:
        assert package.version == VERSION
        # Installed from the local file, not from an apt repository: no source offers apptainer.
        assert "http://" not in host.check_output("apt-cache policy apptainer")
    if host.backend.get_hostname().endswith("-ubuntu2204"):
        # apt took the .deb's dependencies from the Ubuntu 22.04 archive (vendor_facts/ubuntu-main/jammy.yml).
        assert host.package("uidmap").version == "1:4.8.1-2ubuntu2.2"
        assert host.package("fakeroot").version == "1.28-1ubuntu1"


def test_download_matches_the_checksum_it_was_verified_against(host):
    file = FILES[_shape(host)]
    digest = host.check_output(f"sha256sum /var/cache/gpuforge/apptainer/{file}").split()[0]
    assert _mirror_sums(host)[file] == digest
    if _shape(host) == "debian12":
        # The lab's package is the lab's build: Apptainer's published digest (the role's default pin) cannot match
        # it, which is why the lab inventory verifies against the mirror's SHA256SUMS instead (and pins nothing).
        published = vendor_facts.repository("apptainer/deb").fact("sha256_1_5_3")[file]
        assert digest != published


def test_apptainer_conf_binds_the_shared_file_systems(host):
    conf = host.file("/etc/apptainer/apptainer.conf").content_string.splitlines()
    binds = [line.split("=", 1)[1].strip() for line in conf if line.startswith("bind path =")]
    assert binds == ["/etc/localtime", "/etc/hosts", *SHARED, "/var/tmp:/scratch"]
    start = conf.index("# BEGIN gpuforge bind paths (roles/apptainer)")
    assert conf[start + 1 : start + 5] == [f"bind path = {path}" for path in [*SHARED, "/var/tmp:/scratch"]]
    assert "use nvidia-container-cli = no" in conf
    assert "always use nv = no" in conf
    assert "mount home = yes" in conf  # the package's other directives are left as they were


def test_exec_nv_sees_the_gpus_with_the_bind_paths(host):
    run = host.run(f"apptainer exec --nv {IMAGE} nvidia-smi -L")
    assert run.rc == 0, run.stderr
    gpus = [line for line in run.stdout.splitlines() if line.startswith("GPU ")]
    assert len(gpus) == 4 and all("Tesla V100-SXM2-16GB" in line for line in gpus)
    assert "WARNING" not in run.stderr and "Could not find any nv files" not in run.stderr
    binds = host.check_output(f"apptainer exec {IMAGE} printenv GPUFORGE_SIM_APPTAINER_BINDS").split(",")
    assert binds == [
        "/etc/localtime:/etc/localtime",
        "/etc/hosts:/etc/hosts",
        *[f"{path}:{path}" for path in SHARED],
        "/var/tmp:/scratch",
    ]
    nv = host.check_output(f"apptainer exec --nv {IMAGE} printenv GPUFORGE_SIM_APPTAINER_NV").split(",")
    assert "/usr/bin/nvidia-smi" in nv


def test_exec_refuses_a_missing_bind_source_and_image(host):
    run = host.run(f"apptainer exec -B /nonexistent {IMAGE} true")
    assert run.rc == 255
    assert "mount source /nonexistent doesn't exist" in run.stderr
    run = host.run("apptainer exec --nv /opt/gpuforge-lab/images/missing.sif nvidia-smi -L")
    assert run.rc == 255 and run.stderr.startswith("FATAL:   could not open image")
