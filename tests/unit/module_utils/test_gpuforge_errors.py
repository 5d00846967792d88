"""One ParseError base for every parser; each parser keeps its own class name as a subclass."""

from __future__ import annotations

import pytest
from ansible_collections.gpuforge.cluster.plugins.module_utils import (
    gpuforge_errors,
    gpuforge_infiniband,
    gpuforge_kernel,
    gpuforge_nccl_tests,
    gpuforge_nvidia_smi,
    gpuforge_perftest,
    gpuforge_resnet50,
    gpuforge_slurm,
    gpuforge_spectrum_scale,
)
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError, ParseError

PARSER_ERRORS = {
    "gpuforge_infiniband.ParseError": gpuforge_infiniband.ParseError,
    "gpuforge_kernel.ParseError": gpuforge_kernel.ParseError,
    "gpuforge_nccl_tests.NcclTestsParseError": gpuforge_nccl_tests.NcclTestsParseError,
    "gpuforge_nvidia_smi.ParseError": gpuforge_nvidia_smi.ParseError,
    "gpuforge_perftest.ParseError": gpuforge_perftest.ParseError,
    "gpuforge_resnet50.Resnet50ParseError": gpuforge_resnet50.Resnet50ParseError,
    "gpuforge_slurm.ParseError": gpuforge_slurm.ParseError,
    "gpuforge_spectrum_scale.ParseError": gpuforge_spectrum_scale.ParseError,
}


@pytest.mark.parametrize("name", sorted(PARSER_ERRORS))
def test_every_parser_error_is_a_parse_error_and_a_value_error(name):
    error = PARSER_ERRORS[name]
    assert issubclass(error, ParseError)
    assert issubclass(error, ValueError)  # what callers that predate the base class catch
    assert error is not ParseError  # its own class: the name says which parser raised it


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
    ],
    ids=lambda value: getattr(value, "__name__", "text"),
)
def test_the_base_class_catches_every_parser(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def test_one_base_class_object_whichever_way_it_was_imported():
    # Each parser imports the base by its collection path, the one path modules, filters, the CLI and these
    # tests use: every parser's error class must derive from this very class.
    bases = {error.__mro__[1] for error in PARSER_ERRORS.values()}
    assert bases == {gpuforge_errors.ParseError}


def test_option_error_names_the_path_first():
    error = OptionError("expect.min_busbw", "must be a number, got 'fifty'")
    assert str(error) == "expect.min_busbw must be a number, got 'fifty'"
    assert (error.path, error.problem) == ("expect.min_busbw", "must be a number, got 'fifty'")
    assert isinstance(error, ValueError)
