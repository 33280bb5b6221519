"""Network partitions between loopback addresses inside a private network namespace (no iptables).

A fault run re-executes itself under ``unshare -n`` (``reexec_in_namespace``) so the links it
cuts exist only for the test cluster; ``bring_up_loopback`` then makes every 127.0.0.x usable.
``cut(a, b)`` adds policy-routing rules ``from a to b prohibit`` and the reverse, so every packet
between two node addresses is refused at route lookup (a new connection fails with EACCES,
an established one stops delivering); ``heal()`` removes every rule ``cut`` added. Adding or
removing a rule flushes the kernel's route cache, so established sockets see the change.

The rules match source addresses, so each node must bind its outbound sockets to its own
address. kbroker does; Kafka's clients cannot be told to, so ``bind_shim()`` compiles a small
``LD_PRELOAD`` library that binds an unbound IPv4 (or v4-mapped IPv6) socket to ``$KBIND_ADDR``
before it connects to a loopback address. ``link_works(a, b)`` measures a link with a real TCP
connection, and ``node_links()`` lists the established TCP connections with their addresses, so
a run can prove its cuts bite and that nobody connects from an unexpected address.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

RULE_PREFERENCE = 100  # cut rules, looked at before the local table's rule (moved to 200)
LOCAL_TABLE_PREFERENCE = 200
IN_NAMESPACE_ENV = "KBROKER_NETNS"  # set by reexec_in_namespace in the child's environment

_cuts: set[tuple[str, str]] = set()

BIND_SHIM_SOURCE = r"""
/* Bind an unbound socket to $KBIND_ADDR before it connects to a loopback address. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static int is_unbound(int fd) {
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) return 0;
    if (local.ss_family == AF_INET) return ((struct sockaddr_in *)&local)->sin_port == 0;
    if (local.ss_family == AF_INET6) return ((struct sockaddr_in6 *)&local)->sin6_port == 0;
    return 0;
}

static void bind_source(int fd, const struct sockaddr *to) {
    const char *source = getenv("KBIND_ADDR");
    struct in_addr source_v4;
    if (source == NULL || inet_pton(AF_INET, source, &source_v4) != 1 || !is_unbound(fd)) return;
    if (to->sa_family == AF_INET) {
        const struct sockaddr_in *dest = (const struct sockaddr_in *)to;
        if ((ntohl(dest->sin_addr.s_addr) >> 24) != 127) return;
        struct sockaddr_in here;
        memset(&here, 0, sizeof(here));
        here.sin_family = AF_INET;
        here.sin_addr = source_v4;
        bind(fd, (struct sockaddr *)&here, sizeof(here));
    } else if (to->sa_family == AF_INET6) {
        const struct sockaddr_in6 *dest = (const struct sockaddr_in6 *)to;
        if (!IN6_IS_ADDR_V4MAPPED(&dest->sin6_addr) || dest->sin6_addr.s6_addr[12] != 127) return;
        struct sockaddr_in6 here;
        memset(&here, 0, sizeof(here));
        here.sin6_family = AF_INET6;
        here.sin6_addr.s6_addr[10] = 0xff;
        here.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&here.sin6_addr.s6_addr[12], &source_v4, 4);
        bind(fd, (struct sockaddr *)&here, sizeof(here));
    }
}

int connect(int fd, const struct sockaddr *to, socklen_t len) {
    static connect_fn real_connect;
    if (real_connect == NULL) real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    if (to != NULL) {
        int saved = errno;
        bind_source(fd, to);
        errno = saved;
    }
    return real_connect(fd, to, len);
}
"""


def in_namespace() -> bool:
    """True in a process started by ``reexec_in_namespace`` (its own network namespace)."""
    return os.environ.get(IN_NAMESPACE_ENV) == "1"


def reexec_in_namespace(argv: list[str], timeout: float, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run ``python argv...`` from ``cwd`` in a new network namespace (``unshare -n``; needs root);
    its output goes to this process's stdout and stderr."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RuntimeError("unshare (util-linux) is not installed")
    env = {**os.environ, IN_NAMESPACE_ENV: "1"}
    return subprocess.run([unshare, "--net", sys.executable, *argv], env=env, cwd=cwd, timeout=timeout, check=False)


def bring_up_loopback() -> None:
    """``ip link set lo up`` (in a new namespace loopback starts down and no 127.0.0.x works), and
    move the ``local`` table's rule behind the cut rules: at its default preference 0 it would
    deliver every loopback address before any ``prohibit`` rule is looked at."""
    _ip("link", "set", "lo", "up")
    _ip("rule", "add", "pref", str(LOCAL_TABLE_PREFERENCE), "lookup", "local")
    _ip("rule", "del", "pref", "0", "lookup", "local")


def cut(a: str, b: str) -> None:
    """Refuse every packet between addresses ``a`` and ``b`` (both directions)."""
    for source, dest in ((a, b), (b, a)):
        if (source, dest) not in _cuts:
            _ip("rule", "add", "pref", str(RULE_PREFERENCE), "from", source, "to", dest, "prohibit")
            _cuts.add((source, dest))


def isolate(a: str, others: list[str]) -> None:
    """Cut ``a`` from each of ``others``."""
    for other in others:
        cut(a, other)


def heal(a: str | None = None) -> None:
    """Remove the cuts involving ``a`` (all cuts when ``a`` is None)."""
    for source, dest in sorted(_cuts):
        if a is None or a in (source, dest):
            _ip("rule", "del", "pref", str(RULE_PREFERENCE), "from", source, "to", dest, "prohibit")
            _cuts.discard((source, dest))


def current_cuts() -> list[tuple[str, str]]:
    return sorted(_cuts)


def link_works(a: str, b: str, timeout: float = 1.0) -> bool:
    """Whether a TCP connection from ``a`` to a listener on ``b`` gets through (and carries a byte)."""
    with socket.socket() as listener:
        listener.bind((b, 0))
        listener.listen(1)
        listener.settimeout(timeout)
        with socket.socket() as client:
            client.bind((a, 0))
            client.settimeout(timeout)
            try:
                client.connect(listener.getsockname())
                client.sendall(b"x")
                peer, _ = listener.accept()
                with peer:
                    peer.settimeout(timeout)
                    return peer.recv(1) == b"x"
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EHOSTUNREACH, errno.ENETUNREACH) or isinstance(exc, TimeoutError):
                    return False
                raise


def node_links() -> list[tuple[str, str, int | None]]:
    """``(local "addr:port", peer "addr:port", owning pid)`` of every established TCP connection in the namespace."""
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True, text=True, check=True).stdout
    links = []
    for line in out.splitlines():
        fields = line.split()
        endpoints = [f for f in fields if ":" in f and not f.startswith("users:")]
        if len(endpoints) >= 2:
            owner = re.search(r"pid=(\d+)", line)
            links.append((_plain(endpoints[-2]), _plain(endpoints[-1]), int(owner.group(1)) if owner else None))
    return links


def _plain(endpoint: str) -> str:
    # ss prints v4-mapped IPv6 sockets as [::ffff:127.0.0.11]:port
    return endpoint.replace("[::ffff:", "").replace("]", "")


def bind_shim() -> Path:
    """The compiled ``LD_PRELOAD`` library (built once per source version, cached in the temp dir)."""
    digest = hashlib.sha256(BIND_SHIM_SOURCE.encode()).hexdigest()[:12]
    library = Path(tempfile.gettempdir()) / f"kbroker-bind-shim-{digest}.so"
    if library.exists():
        return library
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("a C compiler is needed to build the bind shim for Kafka")
    with tempfile.TemporaryDirectory() as build:
        source = Path(build) / "bind_shim.c"
        source.write_text(BIND_SHIM_SOURCE)
        built = Path(build) / "bind_shim.so"
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(source), "-ldl"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        shutil.move(built, library)  # whole-file move: a concurrent builder never sees half a library
    return library


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)
