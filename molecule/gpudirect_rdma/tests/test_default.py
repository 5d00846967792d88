"""gpudirect_rdma on a lab DGX-1: nvidia_peermem loaded, persisted and reloaded after openibd. The gpudirect_rdma_os
scenario runs these tests on its RHEL 9, Ubuntu 24.04 and Ubuntu 22.04 nodes too."""

import re

import yaml

from gpuforge import vendor_facts
from gpuforge.paths import PROJECT_ROOT

PINS = yaml.safe_load((PROJECT_ROOT / "roles/gpuforge/defaults/main/gpu_stack.yml").read_text(encoding="utf-8"))


def _loaded(host):
    return {line.split()[0]: line.split() for line in host.check_output("lsmod").splitlines()[1:]}


def test_nvidia_peermem_loaded_on_top_of_ofed_and_driver(host, shape):
    modules = _loaded(host)
    assert "nvidia_peermem" in modules
    # ib_core and nvidia are held by the peer memory module (lsmod "Used by").
    assert "nvidia_peermem" in modules["ib_core"][-1].split(",")
    assert "nvidia_peermem" in modules["nvidia"][-1].split(",")
    # What a DOCA-OFED host prints (vendor_facts/nvidia-doca/<os>.yml), not the tarball installer's form.
    assert host.check_output("ofed_info -s") == vendor_facts.repository(f"nvidia-doca/{shape}").fact("ofed_info_s")


def test_module_persisted_for_boot(host):
    conf = host.file("/etc/modules-load.d/nvidia_peermem.conf")
    assert conf.exists
    assert "nvidia_peermem" in [line.strip() for line in conf.content_string.splitlines()]


def test_openibd_dropin_reloads_peermem(host):
    dropin = host.file("/etc/systemd/system/openibd.service.d/gpuforge-peermem.conf")
    assert "ExecStartPost=-/usr/local/sbin/modprobe nvidia_peermem" in dropin.content_string
    assert "gpuforge-peermem.conf" in host.check_output("systemctl show -p DropInPaths openibd")


def test_driver_stamp_records_version(host, shape):
    # The driver release the nvidia_driver role pinned for this OS (roles/gpuforge/defaults/main/gpu_stack.yml).
    driver = PINS["gpuforge_nvidia_driver_versions"]["cuda"][shape]
    stamp = host.file("/var/lib/gpuforge/peermem-driver-version").content_string.strip()
    assert stamp == f"{driver} nvidia_peermem"
    assert re.match(r"^\d+\.\d+\.\d+ ", stamp)


def test_peermem_fault_makes_modprobe_fail(host):
    # The lab fault the role turns into a clear error: the simulated kernel refuses the module.
    host.run_expect([0], "modprobe -r nvidia_peermem")
    fault = '{"faults": [{"type": "peermem_load_failure"}], "hcas": []}'
    host.run_expect([0], f"echo '{fault}' > /tmp/hw-fault.json")
    result = host.run("GPUFORGE_LAB_HARDWARE=/tmp/hw-fault.json modprobe nvidia_peermem")
    assert result.rc == 1
    assert "could not insert 'nvidia_peermem': Invalid argument" in result.stderr
    host.run_expect([0], "modprobe nvidia_peermem")
