"""Plans of the dev stack, made once per test session (tests only read them)."""

import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.datastores import TwoStores
from tests.etcd_pods import stop_shared
from tests.plan import dev_config, plan, sleeping_containers_lab, tenants
from tests.real_etcd import SharedServers
from tests.snapshot_etcd import seeded
from tests.sshd import KUBEADM_EXECUTABLES, Sshd, machine_fakes, needs_sshd
from tests.test_scripts import Fakes

# The pytester fixture: tests that run pytest itself on a module (its module-level guards), in this process.
pytest_plugins = ["pytester"]

# Property tests judge what a parser returns, not how fast: on the 2-core machine, with several xdist workers and
# real etcd and sshd servers beside them, one example may take far longer than Hypothesis' 200 ms default.
settings.register_profile("lab", deadline=None)
settings.load_profile("lab")


def under_mutmut_stats() -> bool:
    # mutmut's stats run records which functions each test calls and later runs only those
    # tests against a function's mutants; a plan built once would count for its first test only.
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


@pytest.fixture(scope="session")
def shared() -> Callable[[str, Callable[[], Any]], Any]:
    """`shared(key, build)`: build once per session, except in mutmut's stats run (once per test)."""
    made: dict[str, Any] = {}

    def get(key: str, build: Callable[[], Any]) -> Any:
        if under_mutmut_stats():
            return build()
        if key not in made:
            made[key] = build()
        return made[key]

    return get


@pytest.fixture(params=[True, False], ids=["first-preview", "up"])
def dev_plan(request, shared):
    """The dev stack as a first `pulumi preview` on an empty stack, and as a `pulumi up`."""
    return shared(f"dev-{request.param}", lambda: plan(dev_config(), preview=request.param))


@pytest.fixture
def up_plan(shared):
    return shared("dev-False", lambda: plan(dev_config(), preview=False))


@pytest.fixture
def preview_plan(shared):
    """The dev stack as a first `pulumi preview` on an empty stack."""
    return shared("dev-True", lambda: plan(dev_config(), preview=True))


@pytest.fixture
def tenants_preview(shared):
    """`tenants_preview(count)`: the first preview of the dev stack with tenants t0, t1... (tests/plan.py `tenants`)."""

    def get(count: int):
        return shared(f"tenants-{count}-preview", lambda: plan(dev_config(tenants=tenants(count)), preview=True))

    return get


@pytest.fixture
def machine_plan(shared):
    """`machine_plan(gpus, preview)`: every tenant on machines, on an existing cluster (no Docker anywhere)."""
    from tests.test_machines import EXISTING, MOCK_GPU_TENANT, REAL_GPU_TENANT, SECRETS

    def get(gpus: str, preview: bool):
        tenant = MOCK_GPU_TENANT if gpus == "mock" else REAL_GPU_TENANT
        config = dev_config(tenants=[tenant], **EXISTING)
        return shared(f"machines-{gpus}-{preview}", lambda: plan(config, preview=preview, secrets=SECRETS))

    return get


@pytest.fixture
def existing_plan(shared):
    """`existing_plan(pieces, preview)`: the lab on an existing cluster with its pieces "installed" or "provided"."""
    from tests.test_management_modes import EXISTING_KUBECONFIG, INSTALLED, PROVIDED

    def get(pieces: str, preview: bool):
        modes = INSTALLED if pieces == "installed" else PROVIDED
        secrets = {"managementKubeconfig": EXISTING_KUBECONFIG}
        config = dev_config(**modes)
        return shared(f"existing-{pieces}-{preview}", lambda: plan(config, preview=preview, secrets=secrets))

    return get


@pytest.fixture(scope="module")
def etcd_servers():
    """The real etcd servers this module's tests share, each reset before a test gets it; stopped and removed when
    the module ends."""
    servers = SharedServers()
    yield servers
    servers.stop()


@pytest.fixture
def real_etcd(etcd_servers):
    """A real etcd server on loopback with client-certificate auth, as a fresh start leaves it (the module's, reset:
    tests/real_etcd.py SharedServers)."""
    return etcd_servers.get("default")


@pytest.fixture
def fresh_pytest(pytester, monkeypatch):
    """`fresh_pytest(module, selection, **environ)`: pytest, in this process, on a test module imported anew in the
    environment given (None unsets a variable): its module-level guards run again, what it imports is loaded already,
    so a run takes a fraction of the seconds a new interpreter would."""

    def run(module: Path, selection: str, **environ: str | None) -> pytest.RunResult:
        for name, value in environ.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        for name in (module.stem, f"tests.{module.stem}"):
            monkeypatch.delitem(sys.modules, name, raising=False)
        return pytester.runpytest_inprocess(str(module), "-q", "-p", "no:cacheprovider", "-k", selection)

    return run


@pytest.fixture
def ci_guard(fresh_pytest, tmp_path):
    """`ci_guard(module, selection, message)`: with none of the binaries on PATH, the selected tests skip on a laptop
    and fail where CI is set, saying message."""

    def check(module: Path, selection: str, message: str) -> None:
        laptop = fresh_pytest(module, selection, PATH=str(tmp_path), CI=None)
        assert laptop.ret == 0 and laptop.parseoutcomes().get("skipped"), laptop.stdout.str()
        ci = fresh_pytest(module, selection, PATH=str(tmp_path), CI="true")
        assert ci.ret != 0, ci.stdout.str()
        assert message in ci.stdout.str(), ci.stdout.str()

    return check


@pytest.fixture
def namespaces():
    """Skips unless the test may make private network namespaces with Debian's iptables in them (test_*_netns.py)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("iptables-legacy"):
        pytest.skip("needs root, unshare and Debian's iptables (.ci/run runs as root and installs them)")


@pytest.fixture
def fakes(tmp_path):
    """Fake host tools (docker, kind, kubectl...) for one script run (tests/test_scripts.py)."""
    return Fakes(tmp_path)


def throwaway_ca(directory: Path, name: str) -> str:
    """A self-signed CA certificate (PEM) made by the openssl CLI, as a tenant's would be."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a throwaway CA")
    subprocess.run(
        shlex.split("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1")
        + ["-subj", f"/CN={name}", "-keyout", str(directory / "ca.key"), "-out", str(directory / "ca.crt")],
        check=True,
        capture_output=True,
    )
    return (directory / "ca.crt").read_text()


@pytest.fixture(scope="module")
def tenant_ca(tmp_path_factory) -> str:
    return throwaway_ca(tmp_path_factory.mktemp("ca"), "ca")


@pytest.fixture(scope="module")
def other_tenant_ca(tmp_path_factory) -> str:
    """Another tenant's CA, or a replaced control plane's."""
    return throwaway_ca(tmp_path_factory.mktemp("other-ca"), "other")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """One loopback sshd per worker (tests/sshd.py); each test's machine points its sessions at its own fakes."""
    needs_sshd()
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def machine(tmp_path, sshd):
    """A machine worker behind a loopback sshd (tests/sshd.py) whose shell and node tools are fakes."""
    return machine_fakes(tmp_path, ("sh", "timeout", "kubectl", "modprobe", "systemctl"), sshd)


class HostPort10250:
    """The real host's port 10250, which the machine check's probe reads (/proc/net/tcp): probes hold it shared, and
    a test that listens on it takes it alone, so a probe on another worker never sees that test's listener."""

    LOCK = Path(tempfile.gettempdir()) / "kamaji-hami-lab-tests-port-10250.lock"

    def __init__(self) -> None:
        self.file = self.LOCK.open("a")
        fcntl.flock(self.file, fcntl.LOCK_SH)

    def take(self) -> None:
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def release(self) -> None:
        self.file.close()  # drops the lock


@pytest.fixture
def host_port_10250():
    port = HostPort10250()
    yield port
    port.release()


@pytest.fixture
def probed(tmp_path, sshd, host_port_10250):
    """The machine check's probe runs in the machine's real shell; only the node tools are fakes."""
    return machine_fakes(tmp_path, ("kubeadm", "kubelet", "kubectl", "systemctl", "containerd", "nvidia-smi",
                                    "nvidia-ctk", "sysctl", "crictl", *KUBEADM_EXECUTABLES), sshd)


@pytest.fixture(scope="session", autouse=True)
def shared_etcd_stops():
    """Stops the real etcd that tests/etcd_pods.py shares between tests, if one was started."""
    yield
    stop_shared()


@pytest.fixture
def containers(shared):
    """(awake up, sleep preview, asleep up, wake preview) of tenant a, next to an awake tenant b."""

    def build():
        awake = plan(sleeping_containers_lab(False), preview=False)
        asleep = plan(sleeping_containers_lab(True), preview=False)
        sleep = plan(sleeping_containers_lab(True), True, awake)
        return awake, sleep, asleep, plan(sleeping_containers_lab(False), True, asleep)

    return shared("sleeping-containers", build)


@pytest.fixture
def etcd(real_etcd):
    """The program's root client on a real etcd seeded as tests/snapshot_etcd.py says."""
    client = seeded(real_etcd)
    yield client
    client.close()


@pytest.fixture
def stores(real_etcd, etcd_servers, tmp_path, monkeypatch):
    """tenant-a and tenant-b on DataStore default (the real_etcd), an empty dedicated DataStore on a second real
    etcd (the module's, reset as real_etcd is), and kubectl port-forward to either (tests/datastores.py)."""
    two = TwoStores(real_etcd, etcd_servers.get("dedicated"))
    two.port_forward(tmp_path, monkeypatch)
    return two


@pytest.fixture
def port_forward(real_etcd, tmp_path, monkeypatch) -> Path:
    """kubectl on PATH that, for port-forward, prints the forwarding line with the real etcd's port and waits."""
    port = real_etcd.url.rsplit(":", 1)[1]
    bin_dir, log = tmp_path / "bin", tmp_path / "kubectl.log"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\necho "Forwarding from 127.0.0.1:{port} -> 2379"\nexec sleep 600\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log
