"""gpuforge: provision, validate and benchmark GPU + RDMA training clusters with Ansible."""

__version__ = "0.1.0"
