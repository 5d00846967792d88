"""Simulated vendor tools for the gpuforge lab (stdlib only: lab nodes run Debian's python3).

Every tool reads the node's hardware document (see hardware.py) and the lab's runtime state
under /run/gpuforge-lab/; none of them touches real hardware.
"""
