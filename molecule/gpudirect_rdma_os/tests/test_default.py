"""The gpudirect_rdma scenario's node tests (molecule/gpudirect_rdma/tests/test_default.py: nvidia_peermem loaded on
top of OFED and the driver, persisted for boot, reloaded after openibd, the driver stamp, the load fault), run on this
scenario's RHEL 9 and Ubuntu nodes. Its validation tests (test_validate.py) read files only that scenario's side
effect writes."""

import importlib.util

from gpuforge.paths import PROJECT_ROOT

_SPEC = importlib.util.spec_from_file_location(
    "gpudirect_rdma_node_tests", PROJECT_ROOT / "molecule" / "gpudirect_rdma" / "tests" / "test_default.py"
)
_NODE_TESTS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_NODE_TESTS)
# The tests, as this module's own for pytest to collect (their shape fixture is molecule/conftest.py's).
globals().update({name: value for name, value in vars(_NODE_TESTS).items() if name.startswith("test_")})
