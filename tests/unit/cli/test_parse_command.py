"""`gpuforge parse`: the KIND registry resolves to real parser functions and the command prints their JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuforge import cli, parsers
from gpuforge.paths import MODULE_UTILS_DIR

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("kind", sorted(parsers.PARSERS))
def test_every_kind_resolves_to_a_callable(kind):
    module, function = parsers.PARSERS[kind]
    if not (MODULE_UTILS_DIR / f"{module}.py").is_file():
        pytest.skip(f"module_utils/{module}.py not written yet")
    assert callable(parsers.resolve(kind)), f"{kind} -> {module}.{function}"


def test_unknown_kind():
    with pytest.raises(parsers.UnknownKind, match="unknown kind 'nope'"):
        parsers.resolve("nope")


def test_parse_nccl_tests_fixture(capsys):
    fixture = FIXTURES / "nccl-tests" / "redp5610_ex4-2_2x8xv100_ib_legacy.txt"
    assert cli.main(["parse", "nccl-tests", str(fixture)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["avg_busbw"] == 12.3088
    assert document["transport"]["mode"] in ("ib", "ib_gdr")
    assert len(document["devices"]) == 16


def test_parse_ibstatus_fixture(capsys):
    fixture = FIXTURES / "ibstatus" / "dgx1_edr_4port_redp5610.txt"
    assert cli.main(["parse", "ibstatus", str(fixture)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [ca["name"] for ca in document["cas"]][:2] == ["mlx5_0", "mlx5_1"]
    first = document["cas"][0]["ports"][0]
    assert (first["state"], first["rate_gbit_per_s"], first["lid"]) == ("Active", 100, 11)


def test_parse_error_is_rc_1(tmp_path, capsys):
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("this is not ib_write_bw output at all\n")
    assert cli.main(["parse", "ib-write-bw", str(garbage)]) == 1
    assert "gpuforge parse: ib-write-bw:" in capsys.readouterr().err
