"""selinux_policy_module: sources, make, semodule -i and the installed checksums, against a fake node whose
`semodule -l` starts from Debian 12's real store (tests/fixtures/semodule/SOURCES.md)."""

from __future__ import annotations

import hashlib
import os
from functools import partial
from pathlib import Path

import pytest
from ansible.module_utils.common.warnings import get_warning_messages
from ansible_collections.gpuforge.cluster.plugins.modules import selinux_policy_module

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "semodule"
DEBIAN_STORE = (FIXTURES / "debian12_selinux-policy-default_l.txt").read_text(encoding="utf-8").split()
NVIDIA_TE = "policy_module(nvidia_container, 1.0)\ntype nvidia_container_t;\n"
NVIDIA_TE_CONTAINER = "policy_module(nvidia_container, 1.0)\ncontainer_domain_template(nvidia_container, container)\n"
INFINIBAND_TE = "policy_module(infiniband, 1.0)\n"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class FakeNode:
    """semodule -l / -i over a module list, make writing <name>.pp from <name>.te in its cwd."""

    def __init__(self, store=None, make_rc=0, install_rc=0, install_lists=True, list_rc=0, list_text=None):
        self.store = list(DEBIAN_STORE if store is None else store)
        self.make_rc, self.install_rc, self.install_lists = make_rc, install_rc, install_lists
        self.list_rc, self.list_text = list_rc, list_text
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []

    def __call__(self, argv, **kwargs):
        argv = list(argv)
        self.calls.append(argv)
        self.kwargs.append(kwargs)
        tool = os.path.basename(argv[0])
        if tool == "semodule" and argv[1] == "-l":
            if self.list_rc:
                return self.list_rc, "", "semodule: SELinux policy is not managed or store cannot be accessed.\n"
            text = self.list_text if self.list_text is not None else "".join(f"{n}\n" for n in sorted(self.store))
            return 0, text or "No modules.\n", ""
        if tool == "semodule" and argv[1] == "-i":
            if self.install_rc:
                return self.install_rc, "", fixture("debian12_i_unresolved_type_stderr.txt")
            name = os.path.basename(argv[2])[: -len(".pp")]
            if self.install_lists and name not in self.store:
                self.store.append(name)
            return 0, "", ""
        if tool == "make":
            if self.make_rc:
                return (
                    self.make_rc,
                    fixture("debian12_make_syntax_error_stdout.txt"),
                    fixture("debian12_make_syntax_error_stderr.txt"),
                )
            name = argv[3][: -len(".pp")]
            source = Path(kwargs["cwd"], f"{name}.te").read_bytes()
            Path(kwargs["cwd"], f"{name}.pp").write_bytes(b"pp:" + hashlib.sha256(source).digest())
            return 0, f"Compiling default {name} module\nCreating default {name}.pp policy package\n", ""
        raise AssertionError(f"unexpected command {argv}")

    def commands(self, *tools: str) -> list[list[str]]:
        return [argv for argv in self.calls if os.path.basename(argv[0]) in tools]

    def installs(self) -> list[str]:
        return [os.path.basename(argv[2]) for argv in self.calls if argv[1:2] == ["-i"]]

    def makes(self) -> list[str]:
        return [argv[3] for argv in self.calls if os.path.basename(argv[0]) == "make"]


@pytest.fixture
def makefile(tmp_path):
    path = tmp_path / "devel" / "Makefile"
    path.parent.mkdir()
    path.write_text("# policy devel Makefile stand-in\n", encoding="ascii")
    return path


@pytest.fixture
def build_dir(tmp_path):
    return tmp_path / "var" / "lib" / "gpuforge" / "selinux"


@pytest.fixture
def run(ansible_module, makefile, build_dir):
    def run(node, modules=None, expect_failure=False, check_mode=False, diff=False, **args):
        base = {"build_dir": str(build_dir), "makefile": str(makefile)}
        if modules is not None:
            base["modules"] = modules
        module = partial(ansible_module, selinux_policy_module, bin_path="/usr/sbin/{}".format)
        return module({**base, **args}, node, expect_failure, check_mode, diff)

    return run


def both(nvidia=NVIDIA_TE, infiniband=INFINIBAND_TE, variants=None):
    return [
        {"name": "nvidia_container", "source": nvidia, "variants": variants or []},
        {"name": "infiniband", "source": infiniband},
    ]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def test_fresh_install(run, build_dir, makefile):
    node = FakeNode()
    result = run(node, both())
    assert result["changed"] is True
    assert mode(build_dir) == 0o700
    assert (build_dir / "nvidia_container.te").read_text(encoding="utf-8") == NVIDIA_TE
    assert mode(build_dir / "nvidia_container.te") == 0o600
    assert node.calls == [
        ["/usr/sbin/semodule", "-l"],
        ["/usr/sbin/make", "-f", str(makefile), "nvidia_container.pp"],
        ["/usr/sbin/semodule", "-i", str(build_dir / "nvidia_container.pp")],
        ["/usr/sbin/make", "-f", str(makefile), "infiniband.pp"],
        ["/usr/sbin/semodule", "-i", str(build_dir / "infiniband.pp")],
        ["/usr/sbin/semodule", "-l"],
    ]
    assert all(kwargs["environ_update"] == {"LC_ALL": "C"} for kwargs in node.kwargs)
    assert [kwargs["cwd"] for kwargs in node.kwargs if "cwd" in kwargs] == [str(build_dir)] * 2
    for name in ("nvidia_container", "infiniband"):
        recorded = build_dir / f"{name}.pp.installed-sha256"
        assert recorded.read_text(encoding="ascii") == sha256(build_dir / f"{name}.pp") + "\n"
        assert mode(recorded) == 0o600
    entry = result["modules"][0]
    assert (entry["name"], entry["listed_before"], entry["compiled"], entry["installed"]) == (
        "nvidia_container",
        False,
        True,
        True,
    )
    assert entry["reason"] == "semodule -l does not list it"
    assert entry["sha256"] == sha256(build_dir / "nvidia_container.pp")
    assert {"nvidia_container", "infiniband"} <= set(node.store)


def test_converged_runs_semodule_l_only(run, build_dir):
    node = FakeNode()
    run(node, both())
    stamps = {path.name: path.stat().st_mtime_ns for path in build_dir.iterdir()}
    node.calls.clear()
    result = run(node, both(), diff=True)
    assert result["changed"] is False
    assert node.calls == [["/usr/sbin/semodule", "-l"]]
    assert {path.name: path.stat().st_mtime_ns for path in build_dir.iterdir()} == stamps
    assert [entry["reason"] for entry in result["modules"]] == [
        "listed by semodule -l and the .pp is the one installed last"
    ] * 2
    assert result["diff"] == []


def test_changed_source_rebuilds_and_reinstalls_that_module_only(run, build_dir):
    node = FakeNode()
    run(node, both())
    node.calls.clear()
    changed = INFINIBAND_TE.replace("1.0", "1.1")
    result = run(node, both(infiniband=changed), diff=True)
    assert result["changed"] is True
    assert node.makes() == ["infiniband.pp"]
    assert node.installs() == ["infiniband.pp"]
    assert (build_dir / "infiniband.te").read_text(encoding="utf-8") == changed
    path = str(build_dir / "infiniband.te")
    assert result["diff"] == [{"before_header": path, "after_header": path, "before": INFINIBAND_TE, "after": changed}]
    entry = result["modules"][1]
    assert entry["reason"].startswith("the .pp differs from the one installed last (")
    assert (build_dir / "infiniband.pp.installed-sha256").read_text(encoding="ascii").strip() == entry["sha256"]


def test_checksum_drift_reinstalls_without_compiling(run, build_dir):
    node = FakeNode()
    run(node, both())
    (build_dir / "nvidia_container.pp.installed-sha256").write_text("0" * 64 + "\n", encoding="ascii")
    node.calls.clear()
    result = run(node, both())
    assert result["changed"] is True
    assert node.makes() == [] and node.installs() == ["nvidia_container.pp"]
    assert result["modules"][0]["reason"] == f"the .pp differs from the one installed last ({'0' * 64})"
    recorded = (build_dir / "nvidia_container.pp.installed-sha256").read_text(encoding="ascii")
    assert recorded == sha256(build_dir / "nvidia_container.pp") + "\n"


def test_module_missing_from_the_store_is_installed_again(run, build_dir):
    node = FakeNode()
    run(node, both())
    node.store.remove("infiniband")
    node.calls.clear()
    result = run(node, both())
    assert node.makes() == [] and node.installs() == ["infiniband.pp"]
    assert result["modules"][1]["listed_before"] is False
    assert node.calls[-1] == ["/usr/sbin/semodule", "-l"] and len(node.commands("semodule")) == 3


def test_missing_pp_is_rebuilt_and_left_installed_when_identical(run, build_dir):
    node = FakeNode()
    run(node, both())
    (build_dir / "infiniband.pp").unlink()
    node.calls.clear()
    result = run(node, both())
    assert node.makes() == ["infiniband.pp"] and node.installs() == []
    assert result["changed"] is True and result["modules"][1]["compiled"] is True


def test_modes_are_restored_without_a_rebuild(run, build_dir):
    node = FakeNode()
    run(node, both())
    (build_dir / "infiniband.te").chmod(0o644)
    build_dir.chmod(0o755)
    node.calls.clear()
    result = run(node, both())
    assert result["changed"] is True and result["modules"][1]["source_changed"] is True
    assert node.calls == [["/usr/sbin/semodule", "-l"]]
    assert (mode(build_dir), mode(build_dir / "infiniband.te")) == (0o700, 0o600)


def test_check_mode_changes_nothing(run, build_dir):
    node = FakeNode()
    result = run(node, both(), check_mode=True, diff=True)
    assert result["changed"] is True
    assert not build_dir.exists()
    assert node.calls == [["/usr/sbin/semodule", "-l"]]
    assert [(e["compiled"], e["installed"], e["sha256"]) for e in result["modules"]] == [(True, True, None)] * 2
    assert [d["after"] for d in result["diff"]] == [NVIDIA_TE, INFINIBAND_TE]
    assert [d["before"] for d in result["diff"]] == ["", ""]
    # a converged node with a changed source: reported, not written, not built, not installed
    run(node, both())
    files = {path.name: path.read_bytes() for path in build_dir.iterdir() if path.is_file()}
    node.calls.clear()
    result = run(node, both(nvidia=NVIDIA_TE + "# more\n"), check_mode=True, diff=True)
    assert result["changed"] is True
    assert {path.name: path.read_bytes() for path in build_dir.iterdir() if path.is_file()} == files
    assert node.calls == [["/usr/sbin/semodule", "-l"]]
    assert result["modules"][0]["installed"] is True and result["modules"][1]["installed"] is False
    assert result["diff"][0]["before"] == NVIDIA_TE and result["diff"][0]["after"] == NVIDIA_TE + "# more\n"


def test_check_mode_before_the_toolchain_is_installed(ansible_module, makefile, build_dir, capsys):
    node = FakeNode()
    args = {"build_dir": str(build_dir), "makefile": str(makefile), "modules": both()}
    result = ansible_module(selinux_policy_module, args, node, False, True, bin_path=lambda name: None)
    assert result["changed"] is True and node.calls == []
    # ansible-core collects module warnings, or prints them at once where a controller display is already set
    # up in this test process (test order decides): either way the warning must be there.
    said = [*get_warning_messages(), capsys.readouterr().err]
    assert any("semodule is not installed yet" in text for text in said)


def test_variant_follows_the_store(run, build_dir):
    node = FakeNode(store=[*DEBIAN_STORE, "container"])
    variants = [{"if_listed": "container", "source": NVIDIA_TE_CONTAINER}]
    result = run(node, both(variants=variants))
    assert result["modules"][0]["variant"] == "container"
    assert (build_dir / "nvidia_container.te").read_text(encoding="utf-8") == NVIDIA_TE_CONTAINER
    assert result["modules"][1]["variant"] is None
    # the same call on a store without a container module writes the plain source
    node.store.remove("container")
    result = run(node, both(variants=variants))
    assert result["modules"][0]["variant"] is None
    assert (build_dir / "nvidia_container.te").read_text(encoding="utf-8") == NVIDIA_TE


def test_single_module_form(run, build_dir):
    node = FakeNode(store=[])
    result = run(node, name="infiniband", source=INFINIBAND_TE)
    assert [entry["name"] for entry in result["modules"]] == ["infiniband"]
    assert node.installs() == ["infiniband.pp"]
    assert node.calls[0] == ["/usr/sbin/semodule", "-l"]


def test_make_failure_names_module_command_rc_stderr_and_fix(run, build_dir, makefile):
    node = FakeNode(make_rc=2)
    result = run(node, both(), expect_failure=True)
    msg = result["msg"]
    assert msg.startswith("compiling policy module nvidia_container: ")
    assert f"`/usr/sbin/make -f {makefile} nvidia_container.pp` failed in {build_dir}" in msg
    assert "(rc 2): gpuforge_syntax.te:3:ERROR 'syntax error' at token 'allow'" in msg
    assert "make: *** [/usr/share/selinux/devel/include/Makefile:166: tmp/gpuforge_syntax.mod] Error 1" in msg
    assert "\nFix: the source must compile against the policy headers" in msg
    assert result["rc"] == 2
    assert node.installs() == []


def test_semodule_install_failure_names_module_command_rc_stderr_and_fix(run, build_dir):
    node = FakeNode(install_rc=1)
    result = run(node, both(), expect_failure=True)
    msg = result["msg"]
    assert msg.startswith("installing policy module nvidia_container: ")
    assert f"`/usr/sbin/semodule -i {build_dir}/nvidia_container.pp` failed" in msg
    assert "(rc 1): Failed to resolve typeattributeset statement" in msg
    assert "/usr/sbin/semodule:  Failed!" in msg
    assert "\nFix: the module must link into the loaded policy" in msg
    assert not (build_dir / "nvidia_container.pp.installed-sha256").exists()


def test_store_not_listing_after_install_fails(run):
    node = FakeNode(install_lists=False)
    result = run(node, both(), expect_failure=True)
    assert result["msg"].startswith("semodule -l does not list nvidia_container, infiniband on ")
    assert "after semodule -i installed nvidia_container, infiniband without an error" in result["msg"]


def test_semodule_l_failure(run):
    result = run(FakeNode(list_rc=1), both(), expect_failure=True)
    assert "reading the policy store before installing: `/usr/sbin/semodule -l` failed" in result["msg"]
    assert "(rc 1): semodule: SELinux policy is not managed" in result["msg"]
    assert "Fix: run as root (become: true)" in result["msg"]


@pytest.mark.parametrize("text", ["", "gpuforge filler line\n"])
def test_unreadable_semodule_l_fails(run, build_dir, text):
    result = run(FakeNode(list_text=text or " \n"), both(), expect_failure=True)
    assert result["msg"].startswith("could not read the policy store before installing from semodule -l on ")
    assert not build_dir.exists()


def test_missing_makefile(run, makefile):
    makefile.unlink()
    result = run(FakeNode(), both(), expect_failure=True)
    assert result["msg"].startswith(f"nvidia_container: the policy Makefile {makefile} is not on ")
    assert "selinux-policy-dev" in result["msg"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"modules": [{"name": "1bad", "source": "x"}]}, "modules[0].name must be a policy module name"),
        (
            {"modules": [{"name": "a", "source": "x"}, {"name": "a", "source": "y"}]},
            "modules[1].name names a a second time",
        ),
        ({"modules": [{"name": "a", "source": "  \n"}]}, "modules[0].source must not be empty"),
        ({"modules": []}, "modules must name at least one module"),
        (
            {"modules": [{"name": "a", "source": "x", "variants": [{"if_listed": "../c", "source": "y"}]}]},
            "modules[0].variants[0].if_listed must be a policy module name",
        ),
        ({"name": "a b", "source": "x"}, "name must be a policy module name"),
        ({"modules": both(), "build_dir": "relative/dir"}, "build_dir must be an absolute path"),
    ],
)
def test_bad_options(run, args, message):
    node = FakeNode()
    result = run(node, expect_failure=True, **args)
    assert result["msg"].startswith(message), result["msg"]
    assert node.calls == []
