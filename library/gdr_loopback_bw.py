#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: GPUDirect RDMA bandwidth of each HCA port with an ib_write_bw loopback from GPU memory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gdr_loopback_bw
short_description: Measure GPUDirect RDMA per HCA port with an ib_write_bw loopback from GPU memory and judge it
description:
  - For each port to measure, starts a perftest C(ib_write_bw) server and then a client on this node, on the same
    HCA and port, both with C(--use_cuda=<gpu>) (GPU memory registered for RDMA) and the client connecting to
    O(address) (the node itself), as Azure/azurehpc-health-checks customTests/azure_ib_write_bw_gdr.nhc does
    (C(-s 8388608 -F --report_gbits), C(numactl -N <numa> -m <numa>)). Ports run one after another.
  - Ports - the InfiniBand ports of O(system) (the link layer of each port's link in O(link_speeds)), the compute
    fabric GPUDirect RDMA serves; Ethernet (storage, RoCE) ports only when listed in O(extra_ports).
  - GPU - of the GPUs O(system)'s numa_affinity puts with the HCA, the closest by C(nvidia-smi topo -m) (O(gpus)
    nics codes PIX, PXB, PHB, NODE), spreading the HCAs over them. C(CUDA_DEVICE_ORDER=PCI_BUS_ID) makes CUDA
    device N nvidia-smi's GPU N.
  - Judges the client's average bandwidth against O(thresholds) for the port's link (min_gbit_per_s or
    min_mib_per_s), or O(min_fraction) of the link's line rate when the link has no entry. Returns the
    C(gdr_ib_write_bw) check of the gpu_node_check result contract; a port below its minimum or without a result
    fails, named with the HCA, port, the GPU's bus ID and NUMA node, with a remedy.
  - Not applicable when O(system) has C(peermem=false) (it runs no GPUDirect RDMA) or no port to measure - the
    module then returns C(applicable=false) and no check, and runs nothing.
  - Every run is under coreutils C(timeout) (its process group is killed), with C(LC_ALL=C).
options:
  system:
    description: The node's expected system (an entry of gpuforge_expected_systems - hcas, numa_affinity, peermem).
    type: dict
    required: true
  link_speeds:
    description: Link name to C(rate_gbit_per_s) and C(link_layer) (gpuforge_expected_link_speeds).
    type: dict
    required: true
  thresholds:
    description:
      - Per link name, one of C(min_gbit_per_s) (Gb/s, 10^9 bit) or C(min_mib_per_s) (2^20 bytes, ib_write_bw's
        MB/sec) - gpuforge_expected_ib_write_bw.
    type: dict
    default: {}
  min_fraction:
    description: Share of the line rate a port must reach when its link has no entry in O(thresholds).
    type: float
    default: 0.9
  extra_ports:
    description: Ethernet ports of O(system) to measure as well, as C(<hca>/<port>) (for example C(mlx5_8/1)).
    type: list
    elements: str
    default: []
  gpus:
    description: C(ansible_facts.nvidia_smi.gpus) (index, bus_id, nics) - to name GPUs by bus ID and pick the closest.
    type: list
    elements: dict
    default: []
  node_checks:
    description:
      - The C(records) of this node's gpu_node_check result. A port that fails because of a check that failed there
        (port not Active, HCA absent, wrong rate, PCIe link, ACS, nvidia-peermem) is recorded with C(caused_by).
    type: list
    elements: dict
    default: []
  size:
    description: Message size in bytes (C(-s)); 8 MiB as Azure's check.
    type: int
    default: 8388608
  iterations:
    description: Iterations (C(-n)); perftest's default for bandwidth tests. Ignored when O(duration) is set.
    type: int
    default: 5000
  duration:
    description: Seconds to run (C(-D)) instead of a number of iterations.
    type: int
  warm_up:
    description: Pass C(--perform_warm_up) as Azure's check does (perftest 4.5 and later).
    type: bool
    default: false
  dmabuf:
    description: Register GPU memory with dma-buf (C(--use_cuda_dmabuf)) instead of through nvidia-peermem.
    type: bool
    default: false
  gid_index:
    description: GID index (C(-x)) for Ethernet (RoCE) ports; InfiniBand ports take none.
    type: int
  numactl:
    description: Run both ends under C(numactl -N <numa> -m <numa>) when numactl is installed.
    type: bool
    default: true
  address:
    description: Address the client connects to for the TCP handshake (this node).
    type: str
    default: 127.0.0.1
  tcp_port:
    description: TCP port of the first port's run (C(-p)); the Nth port measured uses O(tcp_port) + N.
    type: int
    default: 18510
  timeout:
    description: Seconds before one run (server or client) is stopped.
    type: int
    default: 120
  startup_timeout:
    description: Seconds to wait for the server to listen on its TCP port before the client starts.
    type: int
    default: 15
  executable:
    description: perftest ib_write_bw command name or path.
    type: str
    default: ib_write_bw
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
  - gpuforge.cluster.common.read_only
attributes:
  check_mode:
    support: full
    details: In check mode nothing is run; the module plans the ports, finds the tools and returns the commands.
notes:
  - The server is found listening by reading C(/proc/net/tcp) and C(/proc/net/tcp6) (Linux); where they cannot be
    read the client starts after O(startup_timeout) or when the server has ended.
  - In the gpuforge lab, ib_write_bw is a simulator that moves real bytes over TCP
    (lab/sim/gpuforge_sim/ib_write_bw.py).
"""

EXAMPLES = r"""
- name: GPUDirect RDMA loopback per InfiniBand port
  gpuforge.cluster.gdr_loopback_bw:
    system: "{{ gpuforge_expected_systems['dgx-h100-ndr'] }}"
    link_speeds: "{{ gpuforge_expected_link_speeds }}"
    thresholds: "{{ gpuforge_expected_ib_write_bw }}"
    gpus: "{{ ansible_facts.nvidia_smi.gpus }}"
    node_checks: "{{ gpuforge_node_check.records }}"
"""

RETURN = r"""
applicable:
  description: False when the expected system runs no GPUDirect RDMA or has no port to measure (see reason).
  returned: always
  type: bool
reason:
  description: Why the check does not apply; null when it does.
  returned: always
  type: str
ran:
  description: Whether ib_write_bw ran (false in check mode and when not applicable).
  returned: always
  type: bool
healthy:
  description: False when the check failed; true when it was not run.
  returned: always
  type: bool
plan:
  description: The ports to measure (key, hca, port, link, link_layer, rate_gbit_per_s, gpu, bus_id, numa, topo).
  returned: always
  type: list
  elements: dict
unplanned:
  description: Ports the module could not give a NUMA-local GPU ({key, why}).
  returned: always
  type: list
  elements: dict
cmds:
  description: Per port key, the server and client command lines (without the timeout wrapper).
  returned: always
  type: dict
check:
  description:
    - The C(gdr_ib_write_bw) check (name, status, observed, expected, fault, remedy, caused_by). observed holds
      ports ({key - hca, port, link, gpu, bus_id, numa, topo, status ok/low/error, gbit_per_s, mib_per_s, min,
      error_kind, error, remedy}), low, errors and unplanned.
  returned: when ran
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_diagnostics import (
    GDR_ARGUMENT_SPEC,
    GdrLoopback,
)


def main():
    module = AnsibleModule(argument_spec=GDR_ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**GdrLoopback(module, module.params).run())


if __name__ == "__main__":
    main()
