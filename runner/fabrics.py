"""The fabric kinds fabrikit knows, and everything that depends on the kind, in one table.

A site profile names its interconnect (`fabric.kind`). Nothing else compares that name: it
asks this module what the kind means.

- which NCCL transports are the fast path between nodes: what `fabrikit check-log`,
  `fabrikit job-end` and `fabrikit report` call fast and what a fallback (`is_fast`);
- whether the kind needs an inter-node network at all: a log without any network selection
  cannot be confirmed fast on Slingshot or InfiniBand, and is fine on Ethernet;
- what to say when NCCL fell back to sockets, which libfabric provider or net plugin the
  fast path needs (the warnings name them), and which variables make NCCL fail instead of
  falling back (`fabrikit doctor` checks the profile sets them);
- variables a single-node run must not set (HPE: `NCCL_NET` on one node allocates a VNI
  for nothing; fabric-facts.md "Sigma2 Olivia");
- the preset a profile of this kind extends (`bindings/presets/NAME.yaml`), the definition
  template and flavour `fabrikit sites init` drafts, and the evidence that points to the kind
  in a log or on a host (libfabric provider, interface name prefix).

Adding a kind: one entry in `KINDS`, its preset under `bindings/presets/`, and their tests.
Frozen msgspec structs (cheap to define): the profile schema imports this on every dry run.
"""

from __future__ import annotations

import msgspec


class FastPath(msgspec.Struct, frozen=True):
    """One transport that counts as the fabric's fast path."""

    transport: str  # runner.nccl_log.Transport value: "ofi", "ib", "socket"
    providers: frozenset[str | None] | None = None  # libfabric providers that count (None: any)


class FabricKind(msgspec.Struct, frozen=True, kw_only=True):
    """What fabrikit knows about one kind of interconnect."""

    name: str  # the profile's fabric.kind
    title: str  # for people: "HPE Slingshot"
    # Empty: every transport is the expected one (sockets on Ethernet, nothing on loopback).
    fast: tuple[FastPath, ...] = ()
    fast_text: str = ""  # the fast path in messages: "cxi", "InfiniBand"
    fast_provider: str | None = None  # the libfabric provider an OFI rank should have used
    fallback_hint: str = ""  # the usual cause when NCCL used TCP sockets instead
    net_plugin: str | None = None  # the NCCL net plugin the fast path needs (its absence is warned)
    net_plugin_hint: str = ""  # that warning's advice: why the fast path needs the plugin
    verbs_devices: bool = False  # NCCL's own IB transport: "NET/IB : No device found" is warned
    # Variables that make NCCL fail instead of falling back to sockets (`fabrikit doctor`
    # warns when a profile lacks them), with the value the preset sets.
    fail_fast_env: tuple[tuple[str, str], ...] = ()
    single_node_unset: tuple[str, ...] = ()  # variables dropped from the job on one node
    interface_prefixes: tuple[str, ...] = ()  # host interfaces that belong to this fabric
    providers: tuple[str, ...] = ()  # libfabric providers that identify it
    preset: str | None = None  # bindings/presets/<preset>.yaml
    image: tuple[str, str] | None = None  # (definition template, build flavour) for sites init
    checked: bool = True  # check-log, job-end and report judge its transport

    @property
    def needs_network(self) -> bool:
        """True when NCCL must use a fast network between nodes for the job to count as fast."""
        return bool(self.fast)

    def is_fast(self, transport: str, provider: str | None) -> bool:
        """Whether a rank that used `transport` (with libfabric `provider`) was on the fast path."""
        if not self.fast:
            return True
        return any(path.transport == transport and (path.providers is None or provider in path.providers)
                   for path in self.fast)


_IB_OFI_PROVIDERS = frozenset({"verbs", "mlx", "psm2", "psm3", "opx"})  # IB / Omni-Path through libfabric

KINDS: dict[str, FabricKind] = {kind.name: kind for kind in (
    FabricKind(
        name="slingshot", title="HPE Slingshot",
        # aws-ofi-nccl over libfabric's cxi provider; a rank whose provider line is missing is
        # still counted (and warned about: provider-unknown).
        fast=(FastPath("ofi", frozenset({None, "cxi"})),),
        fast_text="cxi", fast_provider="cxi",
        fallback_hint='the libfabric plugin (aws-ofi-nccl) did not load; set NCCL_NET="AWS Libfabric" '
                      "so NCCL fails instead of falling back",
        net_plugin="aws-ofi-nccl",
        net_plugin_hint="on Slingshot NCCL needs aws-ofi-nccl (libnccl-net.so / NCCL_NET_PLUGIN) to use "
                        "the cxi NICs",
        # Source: fabric-facts.md, Slingshot recommended env (fail rather than fall back to TCP).
        fail_fast_env=(("NCCL_NET", "AWS Libfabric"),),
        # Source: fabric-facts.md "Sigma2 Olivia" (HPE: no NCCL_NET for single-node runs).
        single_node_unset=("NCCL_NET",),
        interface_prefixes=("hsn",), providers=("cxi",),
        preset="slingshot", image=("slingshot.def", "slingshot"),
    ),
    FabricKind(
        name="infiniband", title="InfiniBand",
        fast=(FastPath("ib"), FastPath("ofi", _IB_OFI_PROVIDERS)),
        fast_text="InfiniBand", fast_provider="verbs",
        fallback_hint="the image lacks rdma-core userspace (libibverbs1, ibverbs-providers) or the "
                      "IB devices are not visible",
        verbs_devices=True,
        interface_prefixes=("ib",),
        preset="infiniband", image=("infiniband.def", "infiniband"),
    ),
    FabricKind(
        name="ethernet", title="Ethernet/TCP",
        preset="ethernet", image=("infiniband.def", "infiniband"),
    ),
    # One machine (local mode): nothing crosses a network, there is no transport to judge.
    FabricKind(name="loopback", title="this machine (loopback)", checked=False),
)}

NAMES: tuple[str, ...] = tuple(KINDS)
# The kinds whose NCCL transport `check-log --fabric`, `job-end` and `report` judge.
CHECKED: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.checked)


def get(name: str) -> FabricKind:
    """The kind called `name` (a profile's fabric.kind, checked at load)."""
    return KINDS[name]


def checked(name: str | None) -> str | None:
    """`name` if the transport check knows that kind, else None (then the check infers it)."""
    return name if name in CHECKED else None


def by_provider(provider: str | None) -> FabricKind | None:
    """The kind a libfabric provider in a log or `fi_info` output points to (cxi: Slingshot)."""
    return next((kind for kind in KINDS.values() if provider in kind.providers), None)


def by_interface(interface: str) -> FabricKind | None:
    """The kind a network interface name points to (hsn0: Slingshot, ib0: InfiniBand)."""
    return next((kind for kind in KINDS.values()
                 if any(interface.startswith(prefix) for prefix in kind.interface_prefixes)), None)
