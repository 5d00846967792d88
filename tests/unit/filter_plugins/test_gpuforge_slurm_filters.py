"""slurm_out_of_service: the nodes `sinfo --noheader --Node --format "%N|%T|%E"` shows out of service (the slurm role's
verify tasks). The lines are in the shape of the lab's real Slurm (Debian's slurm-wlm) and of sinfo(1)'s state codes."""

from ansible_collections.gpuforge.cluster.plugins.filter.gpuforge_slurm import FilterModule, slurm_out_of_service

READY = ["idle", "mixed", "allocated", "completing"]


def test_every_node_in_service_gives_nothing():
    assert slurm_out_of_service(["gpu01|idle|none", "gpu02|mixed|none", "gpu03|allocated|none"], READY) == []


def test_drained_down_and_not_responding_nodes_are_named_with_their_reason():
    lines = [
        "gpu01|idle|none",
        "gpu02|drained|gres/gpu count reported lower than configured (0 < 8)",
        "gpu03|down|Not responding",
        "gpu04|idle*|none",
    ]
    assert slurm_out_of_service(lines, READY) == lines[1:]


def test_a_reason_holding_the_separator_stays_whole():
    line = "gpu02|drained|maintenance | ticket 42"
    assert slurm_out_of_service([line], READY) == [line]


def test_a_node_in_two_partitions_is_named_once():
    assert slurm_out_of_service(["gpu02|drained|x", "gpu02|drained|x"], READY) == ["gpu02|drained|x"]


def test_a_line_without_a_state_counts_as_out_of_service():
    assert slurm_out_of_service(["gpu01"], READY) == ["gpu01"]


def test_registered_as_a_filter():
    assert FilterModule().filters()["slurm_out_of_service"] is slurm_out_of_service
