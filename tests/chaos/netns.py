"""The chaos cluster's network: one network namespace per process (etcd members, control
planes, node agents) and one for the workload client, all joined to a bridge that lives in a hub
namespace of its own. Nothing is added to the host's namespace: the links, the bridge and the
addresses exist only in the harness's namespaces, so runs beside other tests cannot collide, and
deleting the namespaces removes everything.

Faults: a link cut (the member's port on the bridge goes down: it reaches no one) and packet
filters (iptables in the member's namespace: drop what goes to, or comes from, chosen peers;
one direction only when asked). Each filter is remembered so its heal removes exactly it."""
import os
import subprocess
import threading

SUBNET = "10.99.0"


def run(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def netns_usable():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts)"
    name = f"mchaos-probe-{os.getpid()}"
    r = run("ip", "netns", "add", name, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    run("ip", "netns", "del", name, check=False)
    return None


def iptables_usable():
    r = run("iptables", "-w", "-L", "-n", check=False) if _which("iptables") else None
    return r is not None and r.returncode == 0


def _which(tool):
    return any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin"])


class Network:
    """Members are named ("etcd0", "cp1", "node2", "client"); each gets an address on the
    bridge. `prefix` makes the namespace names unique to this run."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.hub = f"{prefix}-hub"
        self.members = {}  # name -> address
        self.filters = {}  # fault id -> [(member, iptables args)]
        self.cut_links = set()
        self.lock = threading.Lock()
        self.made = []  # namespaces made, for teardown

    def ns(self, member):
        return f"{self.prefix}-{member}"

    def ns_path(self, member):
        return f"/run/netns/{self.ns(member)}"

    def _add_ns(self, name):
        run("ip", "netns", "add", name)
        self.made.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")

    def create(self, members):
        """`members`: {name: last octet}."""
        self._add_ns(self.hub)
        run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.hub, "link", "set", "br0", "up")
        for name, octet in members.items():
            ns = self.ns(name)
            self._add_ns(ns)
            port = self.port(name)
            run("ip", "-n", self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "-n", self.hub, "link", "set", port, "master", "br0")
            run("ip", "-n", self.hub, "link", "set", port, "up")
            address = f"{SUBNET}.{octet}"
            run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            self.members[name] = address

    @staticmethod
    def port(member):
        return f"p-{member}"[:15]

    def address(self, member):
        return self.members[member]

    # ---- faults ----
    def cut_link(self, member):
        with self.lock:
            run("ip", "-n", self.hub, "link", "set", self.port(member), "down")
            self.cut_links.add(member)

    def heal_link(self, member):
        with self.lock:
            run("ip", "-n", self.hub, "link", "set", self.port(member), "up")
            self.cut_links.discard(member)

    def drop(self, fault_id, member, peers, outbound=True, inbound=True):
        """In `member`'s namespace, drop packets to (outbound) and from (inbound) each peer."""
        rules = []
        for peer in peers:
            ip = self.address(peer)
            if outbound:
                rules.append(["OUTPUT", "-d", ip, "-j", "DROP"])
            if inbound:
                rules.append(["INPUT", "-s", ip, "-j", "DROP"])
        with self.lock:
            for r in rules:
                run("ip", "netns", "exec", self.ns(member), "iptables", "-w", "-A", *r)
            self.filters.setdefault(fault_id, []).extend((member, r) for r in rules)

    def undrop(self, fault_id):
        with self.lock:
            for member, r in self.filters.pop(fault_id, []):
                run("ip", "netns", "exec", self.ns(member), "iptables", "-w", "-D", *r, check=False)

    def heal_all(self):
        for fault_id in list(self.filters):
            self.undrop(fault_id)
        for member in list(self.cut_links):
            self.heal_link(member)

    def destroy(self):
        # A namespace goes with its veth ends, its bridge and its filters.
        for name in reversed(self.made):
            run("ip", "netns", "del", name, check=False)
        self.made.clear()


def leftover_namespaces(prefix):
    r = run("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(prefix + "-")]


class InNetns:
    """Enters a namespace for the calling thread (setns(2) is per thread); sockets made while
    inside belong to it. The harness's client threads live in the client namespace this way."""

    CLONE_NEWNET = 0x40000000

    def __init__(self, path):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.path = path

    def enter(self):
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if self.libc.setns(fd, self.CLONE_NEWNET) != 0:
                import ctypes
                raise OSError(ctypes.get_errno(), f"setns {self.path}")
        finally:
            os.close(fd)
