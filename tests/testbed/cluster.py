"""The local test bed's control plane: etcd, kube-apiserver, scheduler, controller-manager.

Every process runs on loopback, detached into its own session so `make testbed-up` can
leave it running; pid files and logs live in the state directory. Failures say which
component failed and where its log is.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import secrets
import signal
import socket
import ssl
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

K8S_VERSION = "v1.20.2"
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TIDB_BENCH_CACHE", Path.home() / ".cache" / "tidb-bench"))
K8S_BIN = CACHE / f"k8s-{K8S_VERSION}"
DEFAULT_STATE = Path(os.environ.get("TIDB_BENCH_TESTBED_DIR", REPO_ROOT / ".testbed"))
PORT_BASE = int(os.environ.get("TIDB_BENCH_TESTBED_PORT_BASE", "16400"))

# Identities with static tokens. `nobody` is authenticated but bound to nothing: RBAC denies it.
ADMIN_USER = "testbed-admin"
NOBODY_USER = "testbed-nobody"


# Detached children stay referenced: a Popen collected while its process runs warns, and
# these processes outlive the call that started them on purpose.
_CHILDREN: list[subprocess.Popen[bytes]] = []


class TestbedError(RuntimeError):
    """The test bed could not start or is broken; the message says what and where the log is."""

    __test__ = False  # not a pytest test class, despite the name


@dataclass
class Ports:
    """Loopback ports the test bed uses; all derived from one base so a clash is easy to move."""

    base: int = PORT_BASE
    etcd_client: int = 0
    etcd_peer: int = 0
    apiserver: int = 0
    mariadb: int = 0
    kubelet: int = 0
    mariadb_tls: int = 0
    cadvisor: int = 0

    def __post_init__(self) -> None:
        self.etcd_client = self.base
        self.etcd_peer = self.base + 1
        self.apiserver = self.base + 2
        self.mariadb = self.base + 3
        self.kubelet = self.base + 4
        self.mariadb_tls = self.base + 8  # started by the TLS tests only (+5 is Prometheus)
        # The node agent's /metrics/cadvisor (+9 stays unused: a test's unreachable PD).
        self.cadvisor = self.base + 10

    def named(self) -> dict[str, int]:
        """Every port with the component that owns it."""
        return {
            "etcd client": self.etcd_client,
            "etcd peer": self.etcd_peer,
            "kube-apiserver": self.apiserver,
            "mariadb": self.mariadb,
            "node agent (kubelet log endpoint)": self.kubelet,
            "mariadb with TLS (TLS tests)": self.mariadb_tls,
            "node agent (/metrics/cadvisor)": self.cadvisor,
        }


def port_in_use(port: int) -> bool:
    """True when something already listens on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def first_blocked_dir(
    path: Path, uid: int, gids: Collection[int], stat_of: Callable[[Path], os.stat_result]
) -> tuple[Path, os.stat_result] | None:
    """The first directory from / down to `path` that user `uid` (groups `gids`) cannot enter.

    Entering a directory needs its search (x) bit for the class the user falls in: owner bits
    for the owner, group bits for a member, other bits for everyone else, only that one class.
    Root enters everything. Parts of `path` that do not exist yet are skipped: the test bed
    creates them. ACLs are not read. Returns the directory and its stat, or None.
    """
    if uid == 0:
        return None
    for d in [*reversed(path.parents), path]:
        try:
            st = stat_of(d)
        except FileNotFoundError:
            break
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid in gids:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return d, st
    return None


def blocked_message(
    service: str, user: str, target: Path, blocked: Path, mode: int, owner: str, remedy: str
) -> str:
    """Which user could not reach which directory, and what to do."""
    return (
        f"{service} runs as user '{user}', who cannot enter {blocked} (mode "
        f"{stat.S_IMODE(mode):04o}, owner {owner}) on the way to {target}. The test bed does not "
        f"change permissions on your directories; {remedy}"
    )


def check_reachable(service: str, user: str, target: Path, remedy: str) -> None:
    """Raise a TestbedError naming the directory `user` cannot enter on the way to `target`."""
    pw = pwd.getpwnam(user)
    gids = {pw.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    found = first_blocked_dir(target, pw.pw_uid, gids, os.stat)
    if found is not None:
        blocked, st = found
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise TestbedError(
            blocked_message(service, user, target, blocked, st.st_mode, owner, remedy)
        )


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Testbed:
    """A handle on one test bed instance (running or not) rooted at `state`."""

    __test__ = False  # not a pytest test class, despite the name

    state: Path = DEFAULT_STATE
    ports: Ports = field(default_factory=Ports)

    # ---- paths ---------------------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def token(self, user: str) -> str:
        """The static bearer token of a test bed identity."""
        tokens = json.loads((self.state / "tokens.json").read_text())
        return str(tokens[user])

    def log_of(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    # ---- lifecycle -----------------------------------------------------------------------
    def is_up(self) -> bool:
        """True when this state dir's apiserver answers /readyz."""
        if not (self.state / "tokens.json").exists():
            return False
        try:
            return self._get("/readyz", timeout=2.0) == 200
        except (OSError, urllib.error.URLError):
            return False

    def start(self) -> None:
        """Start etcd, the apiserver, the scheduler and the controller-manager, and wait."""
        self._check_binaries()
        self._check_ports()
        self.state.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        (self.state / "ports.json").write_text(json.dumps({"base": self.ports.base}))
        self._make_pki()
        self._make_tokens()
        self._write_kubeconfig(self.kubeconfig, self.token(ADMIN_USER))
        self._start_etcd()
        self._start_apiserver()
        self._start_controllers()

    def stop(self) -> None:
        """Stop every process this state dir started (also the agent and MariaDB)."""
        pids = sorted(self.state.glob("*.pid")) if self.state.exists() else []
        for pidfile in pids:
            stop_pidfile(pidfile)
        for proc in list(_CHILDREN):  # reap what this process started
            if proc.poll() is not None:
                _CHILDREN.remove(proc)

    # ---- internals -----------------------------------------------------------------------
    def _check_binaries(self) -> None:
        missing = [
            b
            for b in ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
            if not (K8S_BIN / b).exists()
        ]
        if missing:
            raise TestbedError(
                f"missing Kubernetes binaries {', '.join(missing)} in {K8S_BIN}: "
                "run `make k8s` (scripts/testbed/build-k8s.sh) to build them from Debian's source"
            )
        for tool in ("etcd", "openssl"):
            if not any(
                (Path(d) / tool).exists() for d in os.environ.get("PATH", "").split(":") if d
            ):
                raise TestbedError(
                    f"`{tool}` is not installed: run `make deps` (scripts/testbed/install-deps.sh)"
                )

    def _check_ports(self) -> None:
        busy = [
            f"{port} ({name})" for name, port in self.ports.named().items() if port_in_use(port)
        ]
        if busy:
            raise TestbedError(
                f"port(s) in use on 127.0.0.1: {', '.join(busy)}. Another test bed may be up "
                "(`make testbed-down`), or set TIDB_BENCH_TESTBED_PORT_BASE to another base port"
            )

    def _make_pki(self) -> None:
        """A CA, an apiserver serving cert for 127.0.0.1/localhost, and the service-account key."""
        pki = self.pki
        if (pki / "apiserver.crt").exists():
            return
        pki.mkdir(parents=True, exist_ok=True)
        ext = pki / "san.ext"
        ext.write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default\n"
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
        )
        steps = [
            ["openssl", "genrsa", "-out", "ca.key", "2048"],
            ["openssl", "req", "-x509", "-new", "-key", "ca.key", "-days", "3650",
             "-subj", "/CN=tidb-bench-testbed-ca", "-out", "ca.crt"],
            ["openssl", "genrsa", "-out", "apiserver.key", "2048"],
            ["openssl", "req", "-new", "-key", "apiserver.key", "-subj", "/CN=kube-apiserver",
             "-out", "apiserver.csr"],
            ["openssl", "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3650", "-extfile", "san.ext", "-out", "apiserver.crt"],
            ["openssl", "genrsa", "-out", "sa.key", "2048"],
            ["openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"],
        ]  # fmt: skip
        for cmd in steps:
            r = subprocess.run(cmd, cwd=pki, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise TestbedError(f"`{' '.join(cmd)}` failed in {pki}: {r.stderr.strip()}")

    def _make_tokens(self) -> None:
        path = self.state / "tokens.json"
        if path.exists():
            tokens = json.loads(path.read_text())
        else:
            tokens = {ADMIN_USER: secrets.token_hex(16), NOBODY_USER: secrets.token_hex(16)}
            path.write_text(json.dumps(tokens))
        # token,user,uid,"group1,group2"
        (self.state / "tokens.csv").write_text(
            f'{tokens[ADMIN_USER]},{ADMIN_USER},1,"system:masters"\n'
            f"{tokens[NOBODY_USER]},{NOBODY_USER},2\n"
        )

    def write_kubeconfig_for_token(self, path: Path, token: str) -> Path:
        """A kubeconfig for any bearer token (e.g. a ServiceAccount's), trusting the test bed CA."""
        self._write_kubeconfig(path, token)
        return path

    def _write_kubeconfig(self, path: Path, token: str) -> None:
        import base64

        ca = base64.b64encode((self.pki / "ca.crt").read_bytes()).decode()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "testbed",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "user"}}],
            "current-context": "testbed",
        }
        path.write_text(json.dumps(cfg, indent=2))
        path.chmod(0o600)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        log = self.log_of(name)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives `make testbed-up` returning
                env=env,
                cwd=self.state,
            )
        _CHILDREN.append(proc)
        (self.state / f"{name}.pid").write_text(str(proc.pid))
        return proc.pid

    def _alive_or_raise(self, name: str) -> None:
        pidfile = self.state / f"{name}.pid"
        if not pid_alive(int(pidfile.read_text())):
            raise TestbedError(
                f"{name} exited during start-up; log: {self.log_of(name)}\n"
                + tail(self.log_of(name))
            )

    def _start_etcd(self) -> None:
        data = self.state / "etcd"
        self._spawn(
            "etcd",
            [
                "etcd",
                "--name=testbed",
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{self.ports.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{self.ports.etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{self.ports.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.ports.etcd_peer}",
                f"--initial-cluster=testbed=http://127.0.0.1:{self.ports.etcd_peer}",
                # The test bed is disposable: skip fsync so 2 cores are spent on the benchmark.
                "--unsafe-no-fsync",
            ],
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self._alive_or_raise("etcd")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.ports.etcd_client}/health", timeout=1
                ) as r:
                    if b"true" in r.read():
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.3)
        raise TestbedError(
            f"etcd never became healthy within 30 s; log: {self.log_of('etcd')}\n"
            + tail(self.log_of("etcd"))
        )

    def _start_apiserver(self) -> None:
        pki = self.pki
        self._spawn(
            "kube-apiserver",
            [
                str(K8S_BIN / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports.apiserver}",
                "--insecure-port=0",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={self.state / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                # Fake nodes: the apiserver reaches the node agent's log endpoint by InternalIP.
                "--kubelet-preferred-address-types=InternalIP",
                "--v=1",
            ],
        )
        deadline = time.monotonic() + 90
        last = ""
        while time.monotonic() < deadline:
            self._alive_or_raise("kube-apiserver")
            try:
                if self._get("/readyz", timeout=2.0) == 200:
                    return
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.5)
        raise TestbedError(
            f"kube-apiserver never got ready within 90 s (last: {last}); "
            f"log: {self.log_of('kube-apiserver')}\n" + tail(self.log_of("kube-apiserver"))
        )

    def _start_controllers(self) -> None:
        kc = str(self.kubeconfig)
        self._spawn(
            "kube-controller-manager",
            [
                str(K8S_BIN / "kube-controller-manager"),
                f"--kubeconfig={kc}",
                # No IPAM and no node lifecycle: the fake nodes never heartbeat, and must not
                # be tainted unreachable nor have their pods evicted.
                "--controllers=*,-nodeipam,-nodelifecycle",
                "--leader-elect=false",
                "--secure-port=0",
                "--port=0",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--use-service-account-credentials=false",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(K8S_BIN / "kube-scheduler"),
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--secure-port=0",
                "--port=0",
                "--v=1",
            ],
        )
        time.sleep(1.0)
        self._alive_or_raise("kube-controller-manager")
        self._alive_or_raise("kube-scheduler")

    def _get(self, path: str, timeout: float) -> int:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        req = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token(ADMIN_USER)}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)


def pid_alive(pid: int) -> bool:
    """True when the process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def stop_pidfile(pidfile: Path, grace: float = 10.0) -> None:
    """SIGTERM the process group in a pid file, SIGKILL after `grace` seconds, remove the file."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        pidfile.unlink(missing_ok=True)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 3.0)
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.1)
        if not pid_alive(pid):
            break
    pidfile.unlink(missing_ok=True)
