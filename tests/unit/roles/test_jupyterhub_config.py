"""The jupyterhub role rendered without hosts: jupyterhub_config.py executed as JupyterHub would load it (with a
recording `c` in place of traitlets' config object), the unit drop-in, the hashed requirements, the pip
arguments for a wheelhouse, and the refusal of unpinned releases."""

from __future__ import annotations

import pytest
from gpu_stack_render import OS_FACTS, RoleRender

GROUPS = {"all": ["head01", "gpu01"], "jupyterhub": ["head01"], "slurm_compute": ["gpu01"]}
RELEASES = {"debian12": "bookworm", "ubuntu2204": "jammy"}
TLS = {"jupyterhub_ssl_cert": "/etc/pki/hub.crt", "jupyterhub_ssl_key": "/etc/pki/hub.key"}


def role(os_name="debian12", host="head01", **extra) -> RoleRender:
    facts = {**OS_FACTS[os_name], "distribution_release": RELEASES[os_name]}
    return RoleRender(
        "jupyterhub", os_name, groups=GROUPS, inventory_hostname=host, ansible_facts=facts, **{**TLS, **extra}
    )


class _Section:
    def __init__(self):
        object.__setattr__(self, "values", {})

    def __setattr__(self, name, value):
        self.values[name] = value


class _Config:
    """What a configuration file sets, by class and trait (traitlets' Config is set the same way)."""

    def __init__(self):
        object.__setattr__(self, "sections", {})

    def __getattr__(self, name):
        return self.sections.setdefault(name, _Section())

    def trait(self, dotted):
        section, name = dotted.split(".")
        return self.sections[section].values[name]

    def has(self, dotted):
        section, name = dotted.split(".")
        return name in self.sections.get(section, _Section()).values


def load(text: str) -> _Config:
    config = _Config()
    exec(compile(text, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    return config


def test_default_configuration():
    config = load(role().template("jupyterhub_config.py.j2"))
    assert config.trait("JupyterHub.bind_url") == "https://:8000"
    assert config.trait("JupyterHub.ssl_cert") == "/etc/pki/hub.crt"
    assert config.trait("JupyterHub.ssl_key") == "/etc/pki/hub.key"
    assert config.trait("JupyterHub.hub_bind_url") == "http://0.0.0.0:8081"
    # Compute nodes reach the hub by its inventory name.
    assert config.trait("JupyterHub.hub_connect_ip") == "head01"
    assert config.trait("JupyterHub.proxy_class") == "jupyterhub.proxy.ConfigurableHTTPProxy"
    assert config.trait("ConfigurableHTTPProxy.command") == ["/usr/bin/configurable-http-proxy"]
    assert config.trait("JupyterHub.db_url") == "sqlite:////var/lib/jupyterhub/jupyterhub.sqlite"
    assert config.trait("JupyterHub.cleanup_servers") is False
    assert config.trait("JupyterHub.authenticator_class") == "jupyterhub.auth.PAMAuthenticator"
    assert config.trait("PAMAuthenticator.open_sessions") is False
    assert config.trait("Authenticator.allowed_users") == set()
    assert not config.has("LocalAuthenticator.allowed_groups")
    assert config.trait("JupyterHub.spawner_class") == "batchspawner.SlurmSpawner"
    assert config.trait("SlurmSpawner.exec_prefix") == "sudo -E -u {username}"
    assert config.trait("SlurmSpawner.batchspawner_singleuser_cmd") == "/opt/jupyterhub/bin/batchspawner-singleuser"
    assert config.trait("SlurmSpawner.req_gres") == "gpu:1"
    assert config.trait("SlurmSpawner.req_runtime") == "08:00:00"
    assert config.trait("SlurmSpawner.req_memory") == ""
    assert config.trait("SlurmSpawner.req_nprocs") == ""
    assert config.trait("Spawner.cmd") == ["/usr/bin/jupyterhub-singleuser"]
    assert config.trait("Spawner.environment") == {"JUPYTERHUB_SINGLEUSER_APP": "notebook.notebookapp.NotebookApp"}
    assert config.trait("Spawner.start_timeout") == 300
    assert config.trait("Spawner.http_timeout") == 120


@pytest.mark.parametrize(
    ("gpus", "gpu_type", "gres"), [(1, "", "gpu:1"), (2, "v100", "gpu:v100:2"), ("4", "", "gpu:4"), (0, "v100", "")]
)
def test_gpu_gres_from_the_variables(gpus, gpu_type, gres):
    text = role(jupyterhub_slurm_gpus=gpus, jupyterhub_slurm_gpu_type=gpu_type).template("jupyterhub_config.py.j2")
    assert load(text).trait("SlurmSpawner.req_gres") == gres


def test_dellemc_job_shape_and_access():
    render = role(
        jupyterhub_slurm_cpus=8,
        jupyterhub_slurm_memory="48G",
        jupyterhub_slurm_partition="sxm2",
        jupyterhub_allowed_users=["alice", "bob"],
        jupyterhub_allowed_groups=["dl-users"],
        jupyterhub_admin_users=["alice"],
        jupyterhub_keep_servers_on_restart=False,
    )
    config = load(render.template("jupyterhub_config.py.j2"))
    assert config.trait("SlurmSpawner.req_nprocs") == "8"
    assert config.trait("SlurmSpawner.req_memory") == "48G"
    assert config.trait("SlurmSpawner.req_partition") == "sxm2"
    assert config.trait("Authenticator.allowed_users") == {"alice", "bob"}
    assert config.trait("Authenticator.admin_users") == {"alice"}
    assert config.trait("LocalAuthenticator.allowed_groups") == {"dl-users"}
    assert config.trait("JupyterHub.cleanup_servers") is True


def test_values_with_quotes_and_backslashes_stay_literal():
    options = "--comment=\"it's\" --constraint='a|b' C:\\path"
    config = load(role(jupyterhub_slurm_options=options).template("jupyterhub_config.py.j2"))
    assert config.trait("SlurmSpawner.req_options") == options


def test_another_authenticator_with_extra_config():
    extra = 'c.LDAPAuthenticator.server_address = "ldap.example.com"\nc.LDAPAuthenticator.use_ssl = True'
    render = role(jupyterhub_authenticator_class="ldapauthenticator.LDAPAuthenticator", jupyterhub_extra_config=extra)
    config = load(render.template("jupyterhub_config.py.j2"))
    assert config.trait("JupyterHub.authenticator_class") == "ldapauthenticator.LDAPAuthenticator"
    assert config.trait("LDAPAuthenticator.server_address") == "ldap.example.com"
    assert config.trait("LDAPAuthenticator.use_ssl") is True
    assert not config.has("PAMAuthenticator.open_sessions")


def test_drop_in_runs_the_hub_from_the_virtual_environment():
    lines = role().template("jupyterhub.service.d.conf.j2").splitlines()
    start = [line for line in lines if line.startswith("ExecStart=")]
    # An empty ExecStart= first: it clears the packaged command instead of adding a second one.
    assert start == [
        "ExecStart=",
        "ExecStart=/opt/jupyterhub/bin/python3 -m jupyterhub -f /etc/jupyterhub/jupyterhub_config.py --upgrade-db",
    ]
    assert "[Service]" in lines


def test_requirements_pin_every_file_by_hash():
    lines = [line for line in role().template("requirements.txt.j2").splitlines() if not line.startswith("#")]
    assert lines and all(" --hash=sha256:" in line for line in lines)
    assert lines[0].startswith("batchspawner==1.3.0 ")


@pytest.mark.parametrize(
    ("find_links", "expected"),
    [
        ("", "--require-hashes --no-deps"),
        ("/var/cache/wheels", "--require-hashes --no-deps --no-index --find-links /var/cache/wheels"),
        (
            "http://mirror/python/",
            "--require-hashes --no-deps --no-index --find-links http://mirror/python/ --trusted-host mirror",
        ),
    ],
)
def test_pip_arguments_for_a_wheelhouse(find_links, expected):
    args = role(jupyterhub_find_links=find_links).task("install.yml", "Install batchspawner")
    assert args["extra_args"] == expected
    assert args["virtualenv_site_packages"] is True


def test_packages_per_host():
    head = role().var("jupyterhub_wanted")
    assert head == [
        {"name": "jupyterhub", "version": "3.0.0+ds1-1"},
        {"name": "node-configurable-http-proxy", "version": "4.5.3+~cs15.2.4-3"},
    ]
    # A compute node needs jupyterhub-singleuser and the notebook server, not the proxy.
    assert role(host="gpu01").var("jupyterhub_wanted") == [{"name": "jupyterhub", "version": "3.0.0+ds1-1"}]


def test_an_unpinned_release_is_refused():
    render = role("ubuntu2204")
    wanted = render.var("jupyterhub_wanted")
    assert [item["version"] for item in wanted] == ["", ""]
    task = render.find_task("main.yml", "Every package this host needs is pinned")
    assert render.expr("{{ " + task["ansible.builtin.assert"]["that"] + " }}") is False
