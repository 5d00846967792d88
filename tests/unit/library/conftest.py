"""Harness for library/ modules: run a module in-process.

Tests import modules by their collection path (ansible_collections.gpuforge.cluster.plugins.modules.X).
"""

from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    """Raised in place of AnsibleModule.exit_json (which would exit the process); args[0] is the result."""


class ModuleFail(Exception):
    """Raised in place of AnsibleModule.fail_json; args[0] is the result."""


def _raise(exception):
    def method(self, **result):
        raise exception(result)

    return method


@pytest.fixture
def ansible_module(monkeypatch):
    """Return run(module, args, run_command, expect_failure, check_mode, diff, *, bin_path) -> the result dict.

    run_command(argv, **kwargs) answers AnsibleModule.run_command and bin_path(name) answers get_bin_path;
    either is left unpatched when None. expect_failure: True, the module must end in fail_json; False, in
    exit_json; None, in either. A fail_json result carries failed=True, as Ansible's own fail_json adds it.
    """
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _raise(ModuleExit))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _raise(ModuleFail))

    def run(module, args, run_command=None, expect_failure=False, check_mode=False, diff=False, *, bin_path=None):
        if run_command is not None:
            # A plain function binds as a method and drops `self`; a callable instance would not bind.
            monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: run_command(argv, **kw))
        if bin_path is not None:
            monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: bin_path(name))
        expected = {True: ModuleFail, False: ModuleExit, None: (ModuleExit, ModuleFail)}[expect_failure]
        args = {**args, "_ansible_check_mode": check_mode, "_ansible_diff": diff}
        with patch_module_args(args), pytest.raises(expected) as info:
            module.main()
        result = info.value.args[0]
        return {**result, "failed": True} if info.type is ModuleFail else result

    return run
