"""How long a unit test waits for a subprocess (ansible-playbook, ansible-doc, chromium, mpirun ...) before it calls
the subprocess hung.

A guard against a hang, not a speed check: speed is measured in benchmarks/. make test runs the unit suites in a
control group of low CPU weight beside the Molecule lanes (scripts/background.sh), where they get little CPU until
the lanes end: in the fresh-clone CI run of 2026-12-05 on a slower 2-core machine, eight tests of unit-oldest failed on
120 s guards around one ansible-playbook run each.
"""

HANG_GUARD_S = 900
