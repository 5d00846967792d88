#!/usr/bin/python
# Copyright: (c) 2026, gpuforge maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module: several systemd units brought to their wanted boot and running state, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: systemd_units
short_description: Enable, disable, start or stop a list of systemd units in one call
description:
  - "Brings each unit of I(units), in order, to the boot state (I(enabled)) and running state (I(state)) asked,
    in one module run: one C(systemctl show) reads every unit, then C(systemctl enable), C(disable), C(start)
    or C(stop) runs only where a unit differs."
  - Replaces a row of C(ansible.builtin.systemd_service) tasks (C(munge) then C(slurmd), C(nvidia-persistenced)
    and C(nvidia-dcgm) in gpuforge's roles) with one task.
  - "The read is C(systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- NAME...) in the C
    locale. Every unit is checked before anything runs: a unit that does not exist (C(LoadState=not-found)),
    one that is masked and asked to be enabled or started, one systemd could not load, or one asked to be
    disabled that cannot be (C(static), C(indirect), C(generated), C(transient)) fails the task, naming each
    such unit and what to do, and nothing is changed."
  - "Boot state, from C(UnitFileState) and the is-enabled table of systemctl(1): I(enabled=true) runs
    C(systemctl enable) on a unit that is C(disabled), C(linked), C(linked-runtime) or C(enabled-runtime)
    (enabled under C(/run) only, gone at the next boot; C(ansible.builtin.systemd_service) enables it too);
    C(enabled), C(alias), C(static), C(indirect), C(generated) and C(transient) units count as enabled (the
    states for which C(systemctl is-enabled) exits 0). I(enabled=false) runs C(systemctl disable) on an
    C(enabled) or C(enabled-runtime) unit."
  - "Running state, from C(ActiveState): I(state=started) is met by C(active), C(activating), C(reloading) and
    C(refreshing), and runs C(systemctl start) otherwise (which waits for the start job, as systemd_service
    does); I(state=stopped) is met by C(inactive) and C(failed), and runs C(systemctl stop) otherwise."
  - For each unit the boot state is set before the running state; units are handled in list order, so list a
    unit before the units that need it (C(munge) before C(slurmd)).
  - An alias is acted on through the unit it names (the C(Id) systemctl show reports).
  - "An entry with neither I(enabled) nor I(state) is only read (its state is returned in RV(units)); a unit
    that does not exist is then no error (C(load_state=not-found), C(running=false)): a role can ask which of
    several optional daemons run."
options:
  units:
    description: The units and the state each should be in, in the order they are handled.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The unit's name, such as C(munge.service) or C(gpuforge-gpu-metrics.timer). A name without a unit
            type means C(.service), as for systemctl.
          - One unit per entry, each listed once; not a pattern, a path or a template without an instance.
        type: str
        required: true
      enabled:
        description:
          - Whether the unit should start at boot. Left as it is when not given.
          - A C(static), C(indirect), C(generated) or C(transient) unit cannot be disabled; asking it to is a
            failure.
          - An C(indirect) unit (only C(Also=) in its C([Install]) section) counts as enabled whether or not the
            units of its C(Also=) are; list those units (its C(.socket), say) to enable them.
        type: bool
      state:
        description:
          - Whether the unit should run now. Left as it is when not given.
          - C(started) does not restart a running unit; use a handler with C(ansible.builtin.systemd_service)
            and C(state=restarted) for a changed configuration.
        type: str
        choices: [started, stopped]
  systemctl:
    description:
      - The systemctl to run, a name looked up in C(PATH) (and the C(sbin) directories) or a path.
    type: path
    default: systemctl
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuforge.cluster.common
attributes:
  check_mode:
    support: full
    details:
      - Runs only C(systemctl show) and reports what would change (RV(changed_units), RV(actions)).
  diff_mode:
    support: full
    details:
      - One line per unit that changes, before and after, such as C(munge.service:) C(enabled=disabled
        active=inactive) and C(munge.service:) C(enabled=enabled active=active).
notes:
  - Needs systemd running as PID 1 (C(systemctl show) fails otherwise, and the module with it). Runs as root
    (C(become)).
  - "Covers native systemd units. A SysV init script (C(UnitFileState) C(generated), or empty on an old
    systemd) is not checked against its C(rc.d) links: use C(ansible.builtin.systemd_service) for it."
  - "No C(daemon-reload): after writing or changing a unit file, reload systemd before this task (a handler
    with C(ansible.builtin.systemd_service) and C(daemon_reload=true), flushed with C(meta: flush_handlers))."
  - Masking, restarting and reloading are left to C(ansible.builtin.systemd_service).
seealso:
  - module: ansible.builtin.systemd_service
"""

EXAMPLES = r"""
- name: MUNGE, then slurmd, enabled and running (munge first)
  gpuforge.cluster.systemd_units:
    units:
      - name: munge
        enabled: true
        state: started
      - name: slurmd.service
        enabled: true
        state: started
  become: true

- name: The metrics timer runs; the one-shot service it starts is left to it
  gpuforge.cluster.systemd_units:
    units:
      - name: gpuforge-gpu-metrics.timer
        enabled: true
        state: started
  become: true

- name: The persistence daemon on, DCGM's host engine off (a node that runs no diagnostics)
  gpuforge.cluster.systemd_units:
    units:
      - name: nvidia-persistenced
        enabled: true
        state: started
      - name: nvidia-dcgm
        enabled: false
        state: stopped
  register: gpu_units
  become: true
"""

RETURN = r"""
changed_units:
  description:
    - The units that changed (in check mode, that would change), in list order, each once, by the complete
      name (with its type).
    - When an action fails, the units changed before it (and the failing unit, when an action of it ran
      before) stay listed.
  returned: always
  type: list
  elements: str
  sample: [munge.service, slurmd.service]
units:
  description:
    - Each unit's state as C(systemctl show) read it before anything ran, by complete name; C(running) is true
      for an C(active_state) that I(state=started) accepts (C(active), C(activating), C(reloading), C(refreshing)).
  returned: when systemctl show was read
  type: dict
  sample:
    munge.service: {load_state: loaded, active_state: inactive, unit_file_state: disabled, running: false}
    slurmd.service: {load_state: loaded, active_state: active, unit_file_state: enabled, running: true}
actions:
  description:
    - The systemctl command lines run (in check mode, that would run), in order; C(systemctl show) is not one.
  returned: always
  type: list
  elements: list
  sample: [[/usr/bin/systemctl, enable, "--", munge.service], [/usr/bin/systemctl, start, "--", munge.service]]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_errors import OptionError
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_run import Tool, output_tail, this_host
from ansible_collections.gpuforge.cluster.plugins.module_utils.gpuforge_systemd import (
    RUNNING,
    SHOW_PROPERTIES,
    ParseError,
    UnitError,
    diff_text,
    parse_show,
    plan,
    unit_name,
    unit_states,
)

SYSTEMCTL_FIX = "systemd_units needs systemd (systemctl); on a host without it use ansible.builtin.service"


def check_units(entries) -> list:
    """[{where, name, enabled, state}] from the units option, each name complete (with its type) and listed
    once; raises OptionError naming the option path."""
    if not entries:
        raise OptionError("units", "must list at least one unit")
    seen: dict = {}
    units = []
    for index, entry in enumerate(entries):
        where = f"units[{index}]"
        name = unit_name(f"{where}.name", entry["name"])
        if name in seen:
            raise OptionError(f"{where}.name", f"names {name} a second time ({seen[name]}): list each unit once")
        seen[name] = f"{where}.name"
        units.append({"where": where, "name": name, "enabled": entry["enabled"], "state": entry["state"]})
    return units


class SystemdUnits:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.result = {"changed": False, "changed_units": [], "actions": []}
        try:
            self.units = check_units(module.params["units"])
        except OptionError as exc:
            self.fail(str(exc))
        self.systemctl_tool = Tool(module, module.params["systemctl"], SYSTEMCTL_FIX, result=self.result)
        self.systemctl = self.systemctl_tool.require()

    def fail(self, msg: str, **extra) -> None:
        self.module.fail_json(msg=msg, **extra, **self.result)

    def read(self) -> list:
        """unit_states() of every unit, from one systemctl show."""
        names = [unit["name"] for unit in self.units]
        argv = [self.systemctl, "show", f"--property={','.join(SHOW_PROPERTIES)}", "--", *names]
        rc, out, err = self.systemctl_tool.run(argv[1:])
        if rc != 0:
            self.fail(
                f"`systemctl show` failed on {this_host()} (exit {rc}): {output_tail(err or out)}; this module needs "
                "systemd running as PID 1",
                rc=rc,
            )
        try:
            return unit_states(names, parse_show(out))
        except ParseError as exc:
            self.fail(f"could not read `systemctl show` on {this_host()}: {exc}")
        return []  # not reached: fail exits

    def run(self, action: dict) -> None:
        argv = [self.systemctl, action["verb"], "--", action["unit"]]
        self.result["actions"].append(argv)
        if not self.module.check_mode:
            rc, out, err = self.systemctl_tool.run(argv[1:])
            if rc != 0:
                self.fail(
                    f"{action['name']}: `{' '.join(argv)}` failed on {this_host()} (exit {rc}): "
                    f"{output_tail(err or out)}; `journalctl -u {action['unit']}` (and `systemctl status "
                    f"{action['unit']}`) says why",
                    cmd=argv,
                    rc=rc,
                    stdout=out,
                    stderr=err,
                )
        if action["name"] not in self.result["changed_units"]:
            self.result["changed_units"].append(action["name"])
        self.result["changed"] = True

    def apply(self) -> dict:
        states = self.read()
        self.result["units"] = {
            unit["name"]: {
                **{key: state[key] for key in ("load_state", "active_state", "unit_file_state")},
                "running": state["active_state"] in RUNNING,
            }
            for unit, state in zip(self.units, states)
        }
        try:
            actions = plan(self.units, states)
        except UnitError as exc:
            self.fail(str(exc))
        if self.module._diff:
            self.result["diff"] = diff_text(self.units, states, actions)
        for action in actions:
            self.run(action)
        return self.result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "units": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "enabled": {"type": "bool"},
                    "state": {"type": "str", "choices": ["started", "stopped"]},
                },
            },
            "systemctl": {"type": "path", "default": "systemctl"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**SystemdUnits(module).apply())


if __name__ == "__main__":
    main()
