# gpuforge-health's own process runner, the part of the command that is not module_utils (roles/node_health).
"""The runner gpuforge-health uses on the node, where there is no Ansible and so no AnsibleModule.run_command.

gpuforge-health is module_utils/gpuforge_health.py and the module_utils it imports (the readers and judges that
validation uses), run on the node's Python 3.8+ by a launcher the node_health role writes from its template
gpuforge-health.j2; this file's text is the launcher's body (the template reads it with the file lookup), so it
imports nothing beyond the standard library and the installed module_utils. It is the one place gpuforge-health
starts a process: LocalHost gives the module_utils' Tool the three methods it asks of an AnsibleModule
(get_bin_path, run_command, fail_json) on the standard library's subprocess.

It is not in module_utils because ansible-core 2.21's ansible-test refuses a subprocess call in a module or
module_utils file (pylint sanity test, ansible-bad-function "Call run_command instead of subprocess.Popen":
"ansible-test - Expand functions covered by the ``unwanted`` rule for the ``pylint`` sanity test. It now includes
various ``os.*`` and ``subprocess.*`` subprocess functions in Ansible modules and module_utils.", ansible-core 2.21
changelog, minor changes), and modules have run_command. Inside module_utils, every program still starts through
gpuforge_run.Tool, over an AnsibleModule or over this LocalHost.
"""

import os
import shutil
import subprocess
import sys

from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_health import HealthError, run
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import ToolNotRun


class LocalHost:
    """What a Tool asks of an AnsibleModule (get_bin_path, run_command, fail_json), for gpuforge's programs that
    run on the node without Ansible (a health check started by Slurm or a DaemonSet). Stdlib subprocess, argv
    only; fail_json raises ToolNotRun. timeout_seconds bounds every run (rc 124 and a message when reached)."""

    check_mode = False

    def __init__(self, timeout_seconds=None):
        self.timeout_seconds = timeout_seconds
        # (arguments after the program) -> (rc, stdout) of its last completed run: a caller that judges more than
        # the readers returned (gpuforge-health's Epilog reads the processes from the same nvidia-smi -q -x) reuses
        # the output instead of running the tool twice.
        self.outputs = {}

    @staticmethod
    def get_bin_path(name, required=False, opt_dirs=None):
        if os.path.dirname(name):
            return name if os.access(name, os.X_OK) else None
        path = os.pathsep.join([*(opt_dirs or []), os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
        return shutil.which(name, path=path)

    def run_command(
        self,
        args,
        environ_update=None,
        cwd=None,
        data=None,
        handle_exceptions=True,
        before_communicate_callback=None,
        expand_user_and_vars=True,
        **_ignored,
    ):
        argv = [str(arg) for arg in args]
        if expand_user_and_vars:
            argv = [os.path.expanduser(os.path.expandvars(arg)) for arg in argv]
        try:
            process = subprocess.Popen(  # argv, never a shell: this is the one place gpuforge-health starts a process
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(os.environ, **(environ_update or {})),
                universal_newlines=True,
            )
        except OSError as exc:
            if not handle_exceptions:
                raise
            return 127, "", f"{argv[0]}: {exc}"
        if before_communicate_callback:
            before_communicate_callback(process)
        try:
            out, err = process.communicate(input=data, timeout=self.timeout_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            return 124, out, f"{err}{argv[0]} did not finish within {self.timeout_seconds} s\n"
        self.outputs[tuple(argv[1:])] = (process.returncode, out)
        return process.returncode, out, err

    @staticmethod
    def fail_json(msg, **_result):
        raise ToolNotRun(msg)


class LocalRunner(LocalHost):
    """What the readers ask of an AnsibleModule (get_bin_path, run_command), on the node without Ansible: the one
    command runner's stand-in for AnsibleModule, every run bounded by timeout_seconds; a program it cannot run is a
    HealthError (no verdict, exit 2)."""

    def __init__(self, timeout_seconds=30):
        super().__init__(timeout_seconds)  # LocalHost keeps each run's output (outputs): the -q -x document read

    def fail_json(self, msg, **_partial):
        raise HealthError(msg)


def main():
    """The command's exit status (the launcher passes it to sys.exit)."""
    return run(sys.argv[1:], LocalRunner())
