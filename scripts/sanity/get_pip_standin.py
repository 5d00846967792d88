"""Stand-in for pip's get-pip.py in ansible-test's pip bootstrap, served from the pip the project already has.

ansible-test creates each sanity virtual environment without pip, then downloads get-pip.py from
ci-files.testing.ansible.com to put pip in it (ansible_test/_util/target/setup/requirements.py, `bootstrap`).
That host is not reachable here (only the package registries are), so scripts/sanity.sh leaves this file at
the path ansible-test caches the download in. ansible-test runs it as get-pip.py is run: inside the new
environment's interpreter, with pip's install arguments (`pip==<version>`, `--disable-pip-version-check`...).
It imports pip from the directory named by GPUFORGE_PIP_DIR (the project venv's pip, linked alone so nothing
else of the venv leaks in) and installs what was asked from the package index, as get-pip.py would.
"""

import os
import sys

PIP_DIR = "@PIP_DIR@"


def main():
    sys.path.insert(0, os.environ.get("GPUFORGE_PIP_DIR", PIP_DIR))
    from pip._internal.cli.main import main as pip_main

    # get-pip.py's own options: it installs setuptools and wheel unless told not to; this installs only what is
    # named, so they need no action.
    arguments = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    return pip_main(["install", "--upgrade", "--force-reinstall", *arguments])


if __name__ == "__main__":
    sys.exit(main())
