"""One ParseError for every parser: each parser module raises (and re-exports) gpuforge_errors.ParseError itself.
The one subclass is apt_sources.OpenPGPKeyError, which vendor_apt_repository tells apart (a bad key, not tool
output)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import (
    gpuforge_apt_sources,
    gpuforge_dcgm,
    gpuforge_errors,
    gpuforge_fio,
    gpuforge_infiniband,
    gpuforge_kernel,
    gpuforge_nccl_tests,
    gpuforge_nvbandwidth,
    gpuforge_nvidia_smi,
    gpuforge_p2p,
    gpuforge_packages,
    gpuforge_perftest,
    gpuforge_resnet50,
    gpuforge_selinux,
    gpuforge_slurm,
    gpuforge_spectrum_scale,
    gpuforge_systemd,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError

PARSERS = [
    gpuforge_dcgm,
    gpuforge_fio,
    gpuforge_infiniband,
    gpuforge_kernel,
    gpuforge_nccl_tests,
    gpuforge_nvbandwidth,
    gpuforge_nvidia_smi,
    gpuforge_p2p,
    gpuforge_packages,
    gpuforge_perftest,
    gpuforge_resnet50,
    gpuforge_selinux,
    gpuforge_slurm,
    gpuforge_spectrum_scale,
    gpuforge_systemd,
]
MODULE_UTILS = Path(gpuforge_errors.__file__).resolve().parent


@pytest.mark.parametrize("parser", PARSERS, ids=lambda module: module.__name__.rsplit(".", 1)[1])
def test_every_parser_raises_the_one_parse_error(parser):
    assert parser.ParseError is ParseError
    assert issubclass(ParseError, ValueError)  # what callers that predate the base class catch


def test_no_file_defines_another_parse_error_class():
    defined = {
        f"{path.name}:{node.name}"
        for path in MODULE_UTILS.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and base.id.endswith("ParseError") for base in node.bases)
    }
    # A bad OpenPGP key is not tool output, and vendor_apt_repository tells it apart.
    assert defined == {"gpuforge_apt_sources.py:OpenPGPKeyError"}
    assert issubclass(gpuforge_apt_sources.OpenPGPKeyError, ParseError)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (gpuforge_kernel.parse_lsmod, "garbage\n"),
        (gpuforge_nccl_tests.parse_nccl_tests, "garbage\n"),
        (gpuforge_nvidia_smi.parse_query_xml, "garbage"),
        (gpuforge_infiniband.parse_ibstat, "garbage\n"),
        (gpuforge_perftest.parse_perftest_bw, "garbage\n"),
        (gpuforge_resnet50.parse_resnet50, "garbage\n"),
        (gpuforge_slurm.parse_show_node, "garbage\n"),
        (gpuforge_spectrum_scale.parse_mmlsconfig_y, "garbage\n"),
        (gpuforge_dcgm.parse_diag, "garbage"),
        (gpuforge_fio.parse_fio, "garbage"),
        (gpuforge_nvbandwidth.parse_output, "garbage\n"),
        (gpuforge_p2p.parse_p2p, "garbage\n"),
    ],
    ids=lambda value: getattr(value, "__name__", "text"),
)
def test_the_base_class_catches_every_parser(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def test_option_error_names_the_path_first():
    error = OptionError("expect.min_busbw_gbyte_per_s", "must be a number, got 'fifty'")
    assert str(error) == "expect.min_busbw_gbyte_per_s must be a number, got 'fifty'"
    assert (error.path, error.problem) == ("expect.min_busbw_gbyte_per_s", "must be a number, got 'fifty'")
    assert isinstance(error, ValueError)
