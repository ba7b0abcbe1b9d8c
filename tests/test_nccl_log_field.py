"""check-log on the logs clusters really produce (fabric-facts.md, "Real-world NCCL logs").

Every class of that section has its own test logs here, written by tests/nccl_logs.py from
the facts listed there (no third-party log is copied), and combinations of them: old formats
inside an Open MPI tag inside a CloudWatch export, spliced lines, stripped prefixes, redacted
host names. The answer is read the way users and the acceptance read it: `check-log --json`
(per rank and for the job: transport ofi|ib|socket|failed|none, provider, attempted).
"""

from __future__ import annotations

import html
import io
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nccl_logs as L  # noqa: E402

from runner.check_log_cmd import check_log  # noqa: E402
from runner.nccl_log import LogAnalyser, Transport, Verdict, analyse  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def check(tmp_path: Path, lines: list[str], *args: str, name: str = "job.log") -> tuple[int, dict]:
    """Run `fabrikit check-log --json` (in process) on a log; return (exit code, JSON)."""
    path = L.write_log(tmp_path / name, lines)
    res = CliRunner().invoke(check_log, [str(path), "--json", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, json.loads(res.output)


def ranks_of(d: dict) -> list[tuple]:
    return [(r["rank"], r["transport"], r["provider"]) for r in d["ranks"]]


def job(fn, nodes=2, gpn=4, **kw):
    return L.job(fn, nodes=nodes, gpn=gpn, **kw)


# --------------------------------------------------------------------------------------------
# Old formats: NCCL 2.2-2.3 wording, ring lines without `Using network`, 2.7-2.11 channels


LEGACY = ("2.2.13", "2.3.7", "2.4.8", "2.5.6", "2.6.4", "2.7.8", "2.8.4", "2.10.3", "2.11.4",
          "2.12.12", "2.14.3", "2.17.1")


@pytest.mark.parametrize("nccl", LEGACY)
@pytest.mark.parametrize("net,want,provider", [("IB", "ib", None), ("Socket", "socket", None),
                                               ("AWS Libfabric", "ofi", "efa")])
def test_legacy_versions_every_network(tmp_path, nccl, net, want, provider):
    streams = job(L.legacy_rank, nccl=nccl, net=net, iface="eth0")
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == want and d["provider"] == provider, d["summary"]
    assert {r["transport"] for r in d["ranks"]} == {want}
    assert d["nccl_version"] == nccl and d["verdict"] == "fast" and code == 0
    if net == "IB":
        assert all(r["ib_devices"] == ["mlx5_0:1"] for r in d["ranks"])


@pytest.mark.parametrize("net,want", [("IB", "ib"), ("Socket", "socket")])
@pytest.mark.parametrize("ring", [True, False])
def test_nccl22_lines_without_the_nccl_word(tmp_path, net, want, ring):
    # NCCL <= 2.2 wrote `host:pid:tid [0] INFO Using internal Network IB` and
    # `[0] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]`: no `NCCL` before the level.
    streams = [[x.replace("] NCCL INFO ", "] INFO ") for x in s]
               for s in job(L.legacy_rank, nccl="2.2.13", net=net, iface="eth0", ring=ring)]
    if net == "Socket":
        for r, s in enumerate(streams):
            s.insert(0, f"{L.rank_host(r)}:{40000 + 17 * r}:{40000 + 17 * r} [{r % 4}] "
                        "misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]")
    lines = L.interleave(streams, 2)
    assert not any(" NCCL INFO " in x for x in lines)
    # application lines shaped like the prefix make no process of their own
    lines += [f"12:30:{i:02d} [0] INFO epoch {i} loss 0.5" for i in range(5)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == want and d["nccl_version"] == "2.2.13", d["summary"]
    assert [r["rank"] for r in d["ranks"]] == list(range(8)) and d["nodes"] == 2
    assert {r["transport"] for r in d["ranks"]} == {want}
    if net == "Socket":
        assert all(r["nccl_warnings"] == ["Failed to open libibverbs.so[.1]"] for r in d["ranks"])


@pytest.mark.parametrize("net", ["UCX-UCT", "UCX-UCT-RD"])
def test_nccl_rdma_sharp_plugins_uct_networks_are_verbs(tmp_path, net):
    # nccl-rdma-sharp-plugins' UCX UCT transports name themselves `UCX-UCT`, `UCX-UCT-RD`
    # (its ucx_uct_plugin.c, ucx_uct_rd_plugin.c): verbs through UCX, as `UCX` and `UCX-RMA`
    streams = job(L.ib_rank, nodes=2, gpn=2, nccl="2.21.5", net_name=net)
    streams = [[x for x in s if "NET/IB : Using" not in x] for s in streams]  # (a grep's cut)
    code, d = check(tmp_path, L.interleave(streams, 1))
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]]


@pytest.mark.parametrize("echo,want", [
    ("+ export NCCL_NET=OFI", "ofi"), ('export NCCL_NET="AWS Libfabric"', "ofi"),
    ("NCCL_NET=AWS Libfabric", "ofi"), ("NCCL_NET=IB", "ib"), (None, None),
    ("# export NCCL_NET=Socket   # uncomment to debug without the plugin", None)])
def test_a_script_s_echo_of_nccl_net_names_what_a_failed_init_tried(tmp_path, echo, want):
    # NCCL >= 2.26 where the plugin NCCL_NET names is missing: `Failed to initialize any NET
    # plugin`, which names none; the job script's `set -x` or `env` echoed NCCL_NET (NCCL's
    # own `NCCL_NET set by environment` line needs NCCL_DEBUG_SUBSYS=ENV)
    lines = [echo] if echo else []
    for n in range(2):
        h, pid = f"nid02700{n + 1}", 19001 + n
        lines += [L.info(h, pid, 0, m) for m in (
            "NCCL version 2.27.7+cuda12.9", f"Bootstrap: Using hsn0:10.150.27.{n + 1}<0>",
            "NET/Plugin: Could not find: libnccl-net.so")]
        lines += L.warn(h, pid, 0, "Failed to initialize any NET plugin", where="init.cc:1800")
        lines += [L.info(h, pid, 0, m) for m in ("init.cc:1805 -> 5", "init.cc:2043 -> 5")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == want, d["summary"]
    assert [r["attempted"] for r in d["ranks"]] == [want] * 2
    # ... but not where init failed before any network was tried (no interface for the
    # bootstrap's sockets: NCCL_SOCKET_IFNAME's fault, whatever NCCL_NET says)
    boot = [x.replace("Failed to initialize any NET plugin", "Bootstrap : no socket interface "
                      "found").replace("init.cc:1800", "bootstrap.cc:95") for x in lines]
    code, d = check(tmp_path, boot)
    assert d["transport"] == "failed" and d["attempted"] is None, d["summary"]


@pytest.mark.parametrize("name,want", [("ofi", "ofi"), ("ib", "ib"), ("socket", "socket")])
def test_network_not_found_names_nccl_net_as_the_user_typed_it(tmp_path, name, want):
    # NCCL matches NCCL_NET ignoring case (strcasecmp), and its WARN quotes the setting
    lines = []
    for n in range(2):
        h, pid = f"nid02800{n + 1}", 29001 + n
        lines += [L.info(h, pid, 0, m) for m in (
            "NCCL version 2.21.5+cuda12.4", f"Bootstrap : Using hsn0:10.150.28.{n + 1}<0>",
            "NET/Plugin: No plugin found (libnccl-net.so)")]
        lines += L.warn(h, pid, 0, f"Error: network {name} not found.", where="init.cc:100")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == want, d["summary"]


@pytest.mark.parametrize("name,want", [("IBext", "ib"), ("AWS Libfabric", "ofi")])
def test_nccl23_names_a_plugins_network_as_external(tmp_path, name, want):
    # NCCL 2.2-2.3's initNet(): `Using external Network %s` where a net plugin loaded (else
    # `Using internal Network %s`), the only line of the choice in a paste cut before rings
    lines = []
    for r, host in enumerate(("trn-0", "trn-1")):
        pid = 5001 + 100 * r
        lines += [L.info(host, pid, 0, m) for m in (
            "NCCL version 2.3.7+cuda9.2", f"NET : Using interface ib0:10.1.0.{r + 1}<0>",
            f"Using external Network {name}")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == want and [r["transport"] for r in d["ranks"]] == [want] * 2, \
        d["summary"]


@pytest.mark.parametrize("nccl", ["2.4.8", "2.5.6", "2.6.4"])
@pytest.mark.parametrize("ring", [True, False])
def test_nccl24_bootstrap_socket_line_is_not_the_data_path(tmp_path, nccl, ring):
    # Every rank prints `NET/Socket : Using [0]ib0` for its bootstrap; the data goes over IB.
    streams = job(L.legacy_rank, nccl=nccl, net="IB", iface="ib0", ring=ring)
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "infiniband")
    assert d["transport"] == "ib" and code == 0, d["summary"]
    assert all(r["socket_ifaces"] == ["ib0"] and r["transport"] == "ib" for r in d["ranks"])
    assert "socket-fallback" not in [w["code"] for w in d["warnings"]]


def test_ring_lines_decide_over_device_lines(tmp_path):
    # 2.4-2.6 print no `Using network`: the ring lines say Socket though a device line said IB.
    streams = job(L.legacy_rank, nccl="2.5.6", net="IB", iface="ib0")
    streams = [[x.replace("via NET/IB/0", "via NET/Socket/0") for x in s] for s in streams]
    code, d = check(tmp_path, L.interleave(streams, 2), "--fabric", "infiniband")
    assert d["transport"] == "socket" and code == 1


def test_nccl23_source_files_end_in_cu_and_failures_are_read(tmp_path):
    streams = job(L.failing_rank, case="ib-create-cq", nccl="2.3.7")
    lines = L.interleave(streams, 4)
    assert any("init.cu:" in x for x in lines) and any("ibvwrap.cu:" in x for x in lines)
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1


def test_nccl_2_4_bootstrap_socket_line_is_no_choice(tmp_path):
    # NCCL 2.4 prints `NET/Socket : Using [0]ib0` for its bootstrap on every rank before it
    # loads a plugin and finds IB (nv_peer_memory#56). A paste cut after that line on some
    # ranks is no socket fallback; after `NET/IB : No device found` the socket is the choice.
    def rank(h, pid, ip, rest):
        return [L.info(h, pid, 0, m, tid=pid + 270) for m in
                [f"NET/Socket : Using [0]ib0:{ip}<0>", *rest]]

    ib = ["NET/Plugin : No plugin found (libnccl-net.so).",
          "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.31.1<0>"]
    lines = ["NCCL version 2.4.7+cuda10.0"] + rank("main", 20, "192.168.31.1", ib) \
        + rank("main", 21, "192.168.31.1", ib[:1]) + rank("second", 41, "192.168.31.2", [])
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["mixed"] is False and code == 0, d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["ib", "none", "none"]
    # no IB device anywhere (16 cloud hosts, no plugin): the socket is what they use
    lines = ["NCCL version 2.4.7+cuda10.0"]
    for i in range(4):
        lines += rank(f"ip-10-40-{i}-7", 47000 + i, f"10.40.{i}.7", [
            "NET/Plugin : No plugin found (libnccl-net.so).", "NET/IB : No device found."])
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["attempted"] is None, d["summary"]
    # NCCL >= 2.5 prints `Bootstrap : Using`; a NET/Socket line there is the choice
    lines[0] = "NCCL version 2.5.6+cuda10.1"
    code, d = check(tmp_path, [lines[0]] + rank("second", 41, "192.168.31.2", []))
    assert d["transport"] == "socket", d["summary"]


@pytest.mark.parametrize("why", ["libibverbs", "ib-disabled", "bootstrap-only"])
def test_nccl_2_4_8_socket_line_after_its_own_bootstrap_line_is_the_choice(tmp_path, why):
    # NCCL 2.4.8 prints its bootstrap's own `Bootstrap : Using` line; the `NET/Socket :
    # Using` after it is the transport, here because libibverbs is missing from the image
    # (a WARN NCCL goes on after) or IB was disabled (fairseq#2329, a paste cut before the
    # ring lines, no `Using network` line in 2.4)
    def rank(h, pid, ip):
        msgs = [f"Bootstrap : Using [0]eth0:{ip}<0> [1]docker0:172.17.0.1<0>",
                "NET/Plugin : No plugin found (libnccl-net.so)."]
        warn = []
        if why == "libibverbs":
            warn = [f"{h}:{pid}:{pid} [0] misc/ibvwrap.cc:63 NCCL WARN "
                    "Failed to open libibverbs.so[.1]"]
        elif why == "ib-disabled":
            msgs.append("NCCL_IB_DISABLE set by environment to 1.")
        return [L.info(h, pid, 0, m, tid=pid) for m in msgs] + warn + [
            L.info(h, pid, 0, f"NET/Socket : Using [0]eth0:{ip}<0> [1]docker0:172.17.0.1<0>",
                   tid=pid)]

    lines = ["NCCL version 2.4.8+cuda10.1", *rank("gpu-a17", 5359, "10.8.0.17"),
             *rank("gpu-a18", 6120, "10.8.0.18")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["attempted"] is None and code == 0, d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["socket", "socket"]
    # without its own bootstrap line, 2.4's first NET/Socket line is still the bootstrap's
    # (the test above); the WARN or NCCL_IB_DISABLE alone say IB cannot be had: sockets
    no_boot = [x for x in lines if "Bootstrap :" not in x]
    code, d = check(tmp_path, no_boot)
    assert d["transport"] == ("none" if why == "bootstrap-only" else "socket"), d["summary"]


@pytest.mark.parametrize("net,want", [("Socket", "socket"), ("IB", "ib"),
                                      ("AWS Libfabric", "ofi")])
def test_nccl_2_4_names_its_network_in_the_nic_distance_line(tmp_path, net, want):
    # NCCL 2.3-2.4 print no `Using network` line after 2.3; `CUDA Dev 0[0], Socket NIC
    # distance :  SYS` names the network chosen (polyaxon#657, an MPIJob of 4 pods cut to
    # these lines under an Open MPI tag; nccl#246 with IB)
    lines = []
    for r, (h, pid) in enumerate((("plx-run-master-0", 22), ("plx-run-worker-0", 28),
                                  ("plx-run-worker-1", 31))):
        lines.append(f"[1,{r}]<stdout>:" + L.info(h, pid, 0, "NCCL version 2.4.2+cuda10.0")
                     if r == 0 else "")
        lines.append(f"[1,{r}]<stdout>:" + L.info(h, pid, 0, f"CUDA Dev 0[0], {net} NIC "
                                                    "distance :  SYS", tid=pid + 8))
    code, d = check(tmp_path, [x for x in lines if x])
    assert d["transport"] == want and d["nodes"] == 3, d["summary"]
    assert [r["network"] for r in d["ranks"]] == [net] * 3


def test_nccl_2_2_ring_link_without_ring_number_crosses_nodes(tmp_path):
    # NCCL 2.2 writes a ring's link as `7 -> 8 via NET/Socket/0` (no `Ring 00 :`, and no
    # `NCCL` before INFO: Paddle#14109): a channel line, so traffic crossed nodes
    h, pid = "yq01-gpu-ab0034", 890
    lines = [f"{h}:{pid}:{pid} [0] INFO NET : Using interface xgbe0:10.63.2.14<0>",
             f"{h}:{pid}:{pid} [0] INFO Using internal Network Socket",
             f"{h}:{pid}:1081 [0] INFO 7 -> 8 via NET/Socket/0",
             f"{h}:{pid}:1081 [0] INFO 15 -> 0 via NET/Socket/0"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["inter_node"] is True, d["summary"]
    assert d["ranks"][0]["net_channels"] == 2
    # the link lines alone name the network (IB here)
    code, d = check(tmp_path, [x.replace("Socket", "IB") for x in lines[2:]])
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]


@pytest.mark.parametrize("net", ["gIB", "SPCX"])
def test_google_gib_and_spectrum_x_plugins_are_ib(tmp_path, net):
    # Google's gIB plugin (A3 Ultra, A4: RoCE through "the gIB (InfiniBand) plugin") and
    # NVIDIA's Spectrum-X plugin print NCCL's IB lines under their own name; GKE runs read
    # `none` with an unknown network
    lines = []
    for r, (h, pid) in enumerate((("gke-a4-w-684r7", 3704), ("gke-a4-w-9kq2c", 3711))):
        lines += [L.info(h, pid, 0, m) for m in (
            f"Initialized NET plugin {net}",
            f"NET/{net} : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.52.{2 + r}.7<0>",
            f"Using network {net}",
            f"Channel 00/0 : {1 - r}[0] -> {r}[0] [receive] via NET/{net}/0(0)/GDRDMA")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["inter_node"] is True and code == 0, d["summary"]
    assert all(r["ib_devices"] == ["mlx5_0:1", "mlx5_1:1"] for r in d["ranks"])
    # its completion error is IB's
    h, pid = "gke-a4-w-684r7", 3704
    code, d = check(tmp_path, L.warn(h, pid, 0, f"NET/{net} : Got completion from peer "
                                     "192.168.0.9<55224> with status=12 opcode=0 len=0 vendor err "
                                     "129 (Recv)", where="net_ib.cc:1736"))
    assert d["transport"] == "ib" and d["ranks"][0]["link_error"], d["summary"]
    # a paste that kept only its GPUDirect line names IB too
    code, d = check(tmp_path, [L.info(h, pid, 5, f"NET/{net} : GPU Direct RDMA Enabled for "
                                              "HCA 0 'mlx5_0'")])
    assert d["selected"] == "ib", d["summary"]


@pytest.mark.parametrize("net", ["IB-CAST", "IB-ROCM"])
def test_rccls_own_verbs_networks_are_ib(tmp_path, net):
    # RCCL 2.32 on AMD's AINIC (ionic) NICs: `ncclNet_t netIbCast = { "IB-CAST", ... }`;
    # a 2-node MI300X report read `none` with an unknown network
    lines = [L.info(h, pid, 0, f"Channel 00/0 : {a}[0] -> {b}[0] [receive] via NET/{net}/0/GDRDMA"
                                f"/flush=Always") for h, pid, a, b in (("mi300-a", 11, 8, 0),
                                                                       ("mi300-b", 12, 0, 8))]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]
    assert "unknown-network" not in {w["code"] for w in d["warnings"]}


def test_a_plugins_own_init_line_is_a_weak_choice(tmp_path):
    # LUMI's docs and course quote `NET/OFI Using aws-ofi-rccl 1.4.0` as the proof that the
    # plugin carries RCCL's traffic (it printed `none`); the plugin giving up after it, or a
    # later choice, still wins
    h, pid = "nid005012", 61234
    code, d = check(tmp_path, [L.info(h, pid, 0, "NET/OFI Using aws-ofi-rccl 1.4.0")])
    assert d["selected"] == "ofi", d["summary"]
    gave_up = [L.info(h, pid, 0, "NET/OFI Initializing aws-ofi-nccl 1.7.0"),
               L.info(h, pid, 0, "NET/OFI aws-ofi-nccl initialization failed")]
    code, d = check(tmp_path, gave_up)
    assert d["selected"] == "none", d["summary"]
    code, d = check(tmp_path, gave_up + [L.info(h, pid, 0, "Using network Socket")])
    assert d["selected"] == "socket", d["summary"]
    # ... as is a TCP plugin's own line after it loaded (nccl#1267, GCP, cut there)
    fast = [L.info("instance-8g-1", 525765, 0, "NET/Plugin: Loaded net plugin FastSocket (v4)"),
            L.info("instance-8g-1", 525765, 0, "NET/FastSocket : Flow placement enabled.")]
    code, d = check(tmp_path, fast)
    assert d["selected"] == "socket", d["summary"]
    code, d = check(tmp_path, fast[:1])
    assert d["selected"] == "none", d["summary"]
    # ... also with a colon and no blank after the plugin's name (a GKE JobSet test's A3 Mega
    # log, rotated to the TCPXO plugin's teardown: `NET/FasTrak: SCTP Closed`)
    code, d = check(tmp_path, [L.info("node-0-0", 870, 0, "NET/FasTrak: SCTP Closed", tid=938)])
    assert d["selected"] == "socket", d["summary"]


def test_a_tcp_plugins_warn_names_its_transport(tmp_path):
    # GPUDirect-TCPX's progress WARN names its function, not a file (nccl#1652: the job
    # works, the first start-up is slow): the plugin carried the job, over TCP
    lines = []
    for h, pid, nic, ip in (("a3-w1", 771, "enp12s0", "172.16.0.11"),
                            ("a3-w2", 802, "enp134s0", "172.16.0.49")):
        lines += L.warn(h, pid, 0, f"0xadca8062b70:0xadca805d0f0, nic 0, {nic}, {ip}<39187><-"
                        "172.16.0.95<46723> rx rx ctrl timeout cnt 7331502, nanos 10000000585",
                        where="tcpxResult_t tcpxCommProgress(tcpxComm*):1231")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["attempted"] is None and code == 0, d["summary"]
    # ... also with only `[dev]` before it
    code, d = check(tmp_path, [x[x.index("[0]"):] if x else x for x in lines])
    assert d["transport"] == "socket", d["summary"]
    # ... or nothing at all (DeepSpeed#5693 quoted the one line from its source on)
    code, d = check(tmp_path, [lines[1][lines[1].index("tcpxResult_t"):]])
    assert d["transport"] == "socket", d["summary"]


# --------------------------------------------------------------------------------------------
# Other plugins: IBext/SHARP is IB, FastSocket is a socket transport, UCX is verbs


def test_ibext_sharp_plugin_is_ib(tmp_path):
    streams = job(L.plugin_rank, plugin="NCCL RDMA Plugin v6 (v6)", net_name="IBext_v8",
                  device_line="NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; "
                              "OOB ib0:{ip}<0>")
    code, d = check(tmp_path, L.interleave(streams, 0), "--fabric", "infiniband")
    assert d["transport"] == "ib" and d["verdict"] == "fast" and code == 0
    assert d["plugin"] == "NCCL RDMA Plugin v6" and d["plugin_api"] == "v6"
    assert all(r["ib_devices"] == ["mlx5_0:1", "mlx5_1:1"] and r["network"] == "IBext_v8"
               for r in d["ranks"])


def test_old_hpcx_p2p_plugin_ibext(tmp_path):
    streams = job(L.plugin_rank, plugin="NCCL RDMA Plugin (v5)", net_name="IBext",
                  device_line="P2P plugin IBext")
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert d["transport"] == "ib" and {r["network"] for r in d["ranks"]} == {"IBext"}


def test_amds_anp_plugin_is_roce(tmp_path):
    # RCCL-ANP, AMD's net plugin for its AINIC cards (RoCE): channels name only the plugin
    streams = job(L.plugin_rank, plugin="RCCL-ANP (v10)", net_name="RCCL-ANP",
                  device_line="P2P plugin RCCL-ANP")
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert d["transport"] == "ib" and {r["network"] for r in d["ranks"]} == {"RCCL-ANP"}
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]


def test_fastsocket_plugin_is_a_socket_transport(tmp_path):
    streams = job(L.plugin_rank, plugin="FastSocket (v6)", net_name="FastSocket",
                  device_line="NET/FastSocket : Using [0]eth0:{ip}<0>", gdr=False)
    code, d = check(tmp_path, L.interleave(streams, 5))
    assert d["transport"] == "socket" and d["plugin"] == "FastSocket", d["summary"]
    assert all(r["socket_ifaces"] == ["eth0"] for r in d["ranks"])
    code, d = check(tmp_path, L.interleave(streams, 5), "--fabric", "infiniband")
    assert d["verdict"] == "fallback" and code == 1  # a plugin loaded, still TCP


@pytest.mark.parametrize("plugin,net", [("GPUDirectTCPX_v7 (v7)", "GPUDirectTCPX_v7"),
                                        ("FasTrak (v8)", "FasTrak")])
def test_googles_gpudirect_tcpx_plugins_are_tcp(tmp_path, plugin, net):
    # GCP A3 (GPUDirect-TCPX) and A3 Mega (TCPXO, `Using network FasTrak`): the data goes
    # over TCP on the VM's Ethernet NICs, into GPU memory; a TCP transport, as FastSocket
    streams = job(L.plugin_rank, plugin=plugin, net_name=net,
                  device_line="NET/GPUDirectTCPX : GPUDirectTCPX enable: 1", gdr=False)
    code, d = check(tmp_path, L.interleave(streams, 5))
    assert d["transport"] == "socket" and d["nodes"] == 2, d["summary"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]
    # a missing plugin is no aws-ofi-nccl problem: the advice says so
    lines = L.warn("gke-a3-n1", 301, 0, f"Error: network {net} not found.", where="init.cc:100")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]
    [w] = [w for w in d["warnings"] if w["code"] == "network-not-found"]
    assert "aws-ofi-nccl" not in w["message"] and "NCCL_NET_PLUGIN" in w["message"]


def test_a_one_rank_communicator_is_no_network_even_with_its_pointer_elided(tmp_path):
    # a RoCE guide's probe (ncclCommInitAll of one GPU): the lines lost their prefix, the
    # guide elided the communicator's pointer; one rank crosses no node
    lines = ["NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE",
             "NCCL INFO Using network IBext_v8",
             "NCCL INFO ncclCommInitAll comm ... rank 0 nranks 1 ... - Init COMPLETE"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False and code == 0, d["summary"]
    lines[-1] = lines[-1].replace("nranks 1", "nranks 2")  # two ranks: cannot tell
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["inter_node"] is None, d["summary"]


def test_fastsocket_retry_warnings_then_connected(tmp_path):
    # google/nccl-fastsocket#4: the plugin warns while it retries, then connects; the job ran
    lines = []
    for h, pid in (("full-test-0", 6300), ("full-test-1", 5124)):
        lines += L.warn(h, pid, 0, "Maximum retry reached for connect 3.",
                        where="net_fastsocket.cc:674")
        lines += [L.info(h, pid, 0, m, tid=pid + 25) for m in (
            "connect qid: 3, rqid: 3", "NET/FastSocket : Connected after 1000 retries.")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and code == 0 and d["nodes"] == 2, d["summary"]
    assert all(r["failure"] is None for r in d["ranks"])


# --------------------------------------------------------------------------------------------
# Fallback inside one job


@pytest.mark.parametrize("env,said", [({"NCCL_IB_DISABLE": "1"}, "NCCL_IB_DISABLE=1"),
                                      ({"NCCL_NET": "Socket"}, "NCCL_NET=Socket"), ({}, None)])
def test_sockets_the_job_asked_for_are_named_so(tmp_path, env, said):
    # ai4d-iasc/trixie#77: TCP over ib0 with NCCL_IB_DISABLE=1 echoed; the usual hint
    # (rdma-core missing from the image) would send the user the wrong way
    streams = job(L.socket_rank, iface="ib0", nccl="2.21.5", env=env)
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "infiniband")
    assert d["transport"] == "socket" and d["verdict"] == "fallback" and code == 1
    msg = [w["message"] for w in d["warnings"] if w["code"] == "socket-fallback"][0]
    if said:
        assert f"the job set {said}" in msg and "rdma-core" not in msg, msg
        # ... and nothing calls it a fallback: the job ran on what it asked for
        assert "fell back" not in msg + d["summary"], d["summary"]
        assert f"ran on TCP sockets as the job asked ({said})" in d["summary"]
    else:
        assert "rdma-core" in msg and "fell back to TCP sockets" in d["summary"], msg


def test_ofi_fails_on_some_ranks_they_fall_back_to_sockets(tmp_path):
    ok = job(L.ofi_efa_rank, nccl="2.21.5")
    bad = job(L.ofi_fails_then, then="Socket")
    streams = ok[:4] + bad[4:]
    code, d = check(tmp_path, L.interleave(streams, 7))
    assert ranks_of(d)[:4] == [(r, "ofi", "efa") for r in range(4)]
    assert [(r["rank"], r["transport"]) for r in d["ranks"][4:]] == [(r, "socket") for r in range(4, 8)]
    assert d["transport"] == "socket" and d["mixed"] is True and d["provider"] == "efa"
    codes = [w["code"] for w in d["warnings"]]
    assert "mixed-transports" in codes and "plugin-failed" in codes
    assert all(r["plugin_failed"] for r in d["ranks"][4:])
    assert all(r["failure"] is None for r in d["ranks"])


def test_ofi_fails_everywhere_then_ib(tmp_path):
    streams = job(L.ofi_fails_then, then="IB", iface="ib0")
    code, d = check(tmp_path, L.interleave(streams, 7), "--fabric", "infiniband")
    assert d["transport"] == "ib" and code == 0 and d["mixed"] is False
    assert d["provider"] == "efa"  # libfabric's own lines named it


def test_ofi_verbs_provider_errors_then_internal_ib(tmp_path):
    streams = job(L.ofi_verbs_then_ib)
    code, d = check(tmp_path, L.interleave(streams, 2), "--fabric", "infiniband")
    assert d["transport"] == "ib" and d["verdict"] == "fast" and code == 0, d["summary"]
    assert d["provider"] == "verbs" and d["provider_stack"] == "verbs;ofi_rxm"
    assert {r["network"] for r in d["ranks"]} == {"IB"}
    assert "plugin-failed" in [w["code"] for w in d["warnings"]]


# --------------------------------------------------------------------------------------------
# Chosen, then failed during init: `failed`, carrying the transport it tried


@pytest.mark.parametrize("case,attempted", [("ib-create-cq", "ib"), ("ib-modify-qp", "ib"),
                                            ("socket-wrong-type", "socket"),
                                            ("ofi-open-av", "ofi"), ("socket-family", "socket")])
def test_transport_chosen_then_failed_with_an_error_chain(tmp_path, case, attempted):
    streams = job(L.failing_rank, case=case)
    code, d = check(tmp_path, L.interleave(streams, 9))
    assert d["transport"] == "failed" and d["attempted"] == attempted, d["summary"]
    assert d["selected"] == "failed" and d["verdict"] == "failed" and code == 1
    assert all(r["transport"] == "failed" and r["attempted"] == attempted for r in d["ranks"])
    assert L.INIT_FAILURES[case][2] in d["summary"]
    if attempted == "ofi":
        assert d["provider"] == "efa"


def test_failure_on_some_ranks_fails_the_job_and_keeps_the_others(tmp_path):
    streams = job(L.ib_rank)[:4] + job(L.failing_rank, case="ib-create-cq")[4:]
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "infiniband")
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1
    assert [r["transport"] for r in d["ranks"]] == ["ib"] * 4 + ["failed"] * 4
    assert d["summary"].startswith("fabrikit: ERROR NCCL network init failed on 4/8 ranks: "
                                   "Call to ibv_create_cq failed (while trying ib)")


def test_failed_init_of_any_plugin_with_nccl_net_set(tmp_path):
    lines = []
    for r in range(2):
        h, pid = f"n{r}", 100 + r
        lines += [L.info(h, pid, 0, L.env_echo("NCCL_NET", "IB")),
                  L.info(h, pid, 0, "NET/IB : No device found."),
                  L.info(h, pid, 0, "Failed to initialize NET plugin IB"),
                  *L.warn(h, pid, 0, "Failed to initialize any NET plugin", where="plugin/net.cc:380"),
                  L.info(h, pid, 0, "init.cc:1300 -> 5")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1


@pytest.mark.parametrize("err", ["unhandled system error",
                                 "remote process exited or there was a network error / "])
def test_nccl_tests_failure_line_after_network_channels_fails_the_job(tmp_path, err):
    # nccl-tests#36: rings over NET/IB/GDRDMA between two hosts, then nccl-tests' own
    # `HOST: Test NCCL failure common.cu:345 'unhandled system error'` on both, no WARN in
    # the paste; the maintainer: "we're back at the IB communication problem"
    lines = []
    for r, h in enumerate(("nc24-a", "nc24-b")):
        lines += [f"#  Rank  {r} Group  0 Pid  {1170 + r} on     {h} device  0 [0x00] Tesla V100"]
        lines += [L.info(h, 1170 + r, 0, m) for m in (
            f"NET/IB : Using [0]mlx4_0:1/IB ; OOB eth0:10.0.0.{4 + r}<0>",
            f"Ring 00 : {1 - r} -> {r} [receive] via NET/IB/0/GDRDMA",
            f"Ring 00 : {r} -> {1 - r} [send] via NET/IB/0/GDRDMA")]
    good = list(lines)
    lines += [f"{h}: Test NCCL failure common.cu:345 '{err}'" for h in ("nc24-a", "nc24-b")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1, d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["failed", "failed"]
    # an error that is no network's ('invalid usage'), or one node's run, keeps the verdict
    code, d = check(tmp_path, good + ["nc24-a: Test NCCL failure common.cu:345 'invalid usage'"])
    assert d["transport"] == "ib", d["summary"]
    one = [x.replace("nc24-b", "nc24-a").replace("10.0.0.5", "10.0.0.4") for x in lines]
    code, d = check(tmp_path, one)
    assert d["transport"] == "none", d["summary"]


def test_pytorchs_echo_of_a_link_error_is_the_job_s_link_error(tmp_path):
    # A paste of two ranks' channel lines over IB, then PyTorch's exception text, whose
    # `Last error:` is the link's (error 12, retry exceeded), with no rank's prefix and no
    # WARN of NCCL's own (stanford_alpaca#207's text, two hosts' lines kept)
    lines = [L.info("c7a1d2e0", 5325, 0, "Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0"),
             L.info("f0b9e311", 74352, 0, "Channel 00 : 1[1a000] -> 0[1a000] [receive] via NET/IB/0")]
    echo = ["RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure "
            "was: NCCL error: remote process exited or there was a network error, NCCL version "
            "2.14.3", "ncclRemoteError: A call failed possibly due to a network error or a "
            "remote process exiting prematurely.", "Last error:",
            "NET/IB : Got completion from peer 11.21.4.12<39138> with error 12, opcode 0, len 0, "
            "vendor err 129"]
    code, d = check(tmp_path, lines + echo)
    assert d["transport"] == "ib" and code == 0, d["summary"]
    assert all(r["link_error"].startswith("NET/IB : Got completion from peer")
               for r in d["ranks"])
    assert "link-failed" in [w["code"] for w in d["warnings"]]
    # without the echo, the same channels read IB
    code, d = check(tmp_path, lines + echo[:2])
    assert d["transport"] == "ib" and not any(r["link_error"] for r in d["ranks"])


def test_one_process_driving_every_gpu_over_its_nic_stays_on_one_node(tmp_path):
    # nccl#707: one process drives 4 GPUs (`-g 4`) and its rings go through the host's NICs
    # (`via NET/IB/x/GDRDMA`, P2P unused): every link joins two of its own ranks, 0-3
    h, pid = "10-90-43-152", 120890
    lines = [L.info(h, pid, d, m) for d in range(4) for m in (
        f"NET/IB : Using [0]mlx5_8:1/IB [1]mlx5_9:1/IB ; OOB eth0:10.90.43.152<0>",
        f"Channel 00 : {d}[{d}] -> {(d + 1) % 4}[{(d + 1) % 4}] [send] via NET/IB/{d}/GDRDMA",
        f"Channel 00 : {(d + 3) % 4}[{(d + 3) % 4}] -> {d}[{d}] [receive] via NET/IB/{d}/GDRDMA")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["selected"] == "ib" and code == 0, d["summary"]
    # the same process in a job of two such nodes links to ranks 4-7 of the other one
    far = [x.replace("-> 1[1]", "-> 4[0]").replace("3[3] -> 0[0]", "7[3] -> 0[0]")
           for x in lines]
    code, d = check(tmp_path, far)
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]


def test_a_topology_failure_before_any_network_fails_the_job(tmp_path):
    # aws-ofi-nccl#476 (p5): the topology file lacks `arch`; init dies before a network is
    # chosen, and nothing says the job stayed on one node: failed, nothing attempted
    h, pid = "p5-st-1", 60112
    lines = [L.info(h, pid, 0, "NCCL version 2.18.5+cuda12.2"),
             *L.warn(h, pid, 0, "Attribute arch of node cpu not found", where="graph/xml.h:101"),
             *[L.info(h, pid, 0, c) for c in ("graph/xml.cc:594 -> 3", "graph/topo.cc:692 -> 3",
                                              "init.cc:880 -> 3", "group.cc:95 -> 3")]]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] is None and code == 1, d["summary"]


def test_a_one_node_run_cut_after_no_ib_device_is_no_failure(tmp_path):
    # an nccl-tests `-g 2` run on one host (its rank table says so) whose paste ends at
    # `NET/IB : No device found.`: a network was never to be used
    h, pid = "llm207", 149
    lines = [f"#  Rank  {r} Group  0 Pid    {pid} on     {h} device  {r} [0x5{6 + r}] A100"
             for r in range(2)]
    lines += [L.info(h, pid, 0, m) for m in ("Bootstrap : Using eno1:172.17.120.207<0>",
                                             "NET/IB : No device found.")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and code == 0, d["summary"]


@pytest.mark.parametrize("prefix", ["", "gpu-n3:771:771 ", "first"])
def test_records_joined_by_spaces_are_read_one_by_one(tmp_path, prefix):
    # GitHub's quote-reply of a rendered paste turns its newlines into spaces
    # (LLaMA-Factory#6111: `> > [0] NCCL INFO ... [0] NCCL INFO Using network Socket`); the
    # reporter: RDMA was off, NCCL found no IB NIC
    msgs = ["NCCL_IB_DISABLE set by environment to 0.", "NET/IB : No device found.",
            "NET/Socket : Using [0]eth0:10.47.14.218<0>",
            "Using non-device net plugin version 0", "Using network Socket"]
    line = "> > " + " ".join(f"{prefix}[0] NCCL INFO {m}" for m in msgs)
    if prefix == "first":  # only the first record kept its host:pid:tid
        line = "> > gpu-n3:771:771 " + " ".join(f"[0] NCCL INFO {m}" for m in msgs)
    code, d = check(tmp_path, ["> > NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0,mlx5_1", line])
    assert d["transport"] == "socket" and code == 0, d["summary"]
    assert d["ranks"][0]["socket_ifaces"] == ["eth0"] and len(d["ranks"]) == 1
    # two writers' splice (two processes' records) still drops the cut part
    spliced = [L.info("gpu-n3", 771, 0, "Using netgpu-n4:802:802 [0] NCCL INFO Using network IB")]
    code, d = check(tmp_path, spliced)
    assert [(r["pid"], r["transport"]) for r in d["ranks"]] == [(802, "ib")], d["summary"]


def test_two_processes_records_joined_by_spaces_are_read_one_by_one(tmp_path):
    # A quote-reply that joined a one-machine paste's lines with blanks: two ranks of one
    # host each choose sockets, then each one's init fails on a GPU the other holds; every
    # record keeps its own `host:pid:tid` (and the WARN its source file)
    h = "ubun"
    def rec(pid: int, tid: int, msg: str, where: str = "") -> str:
        return f"{h}:{pid}:{tid} [0] {where + ' ' if where else ''}NCCL " + msg
    init = [rec(pid, pid, "INFO " + m) for pid in (240, 241) for m in (
        "Bootstrap : Using [0]enp4s0:10.214.24.190<0>", "NET/IB : No device found.",
        "NET/Socket : Using [0]enp4s0:10.214.24.190<0>", "Using network Socket")]
    init.insert(4, "NCCL version 2.7.8+cuda10.2")  # (the version line has no prefix)
    dup = [" ".join([rec(pid, pid + 46, f"WARN Duplicate GPU detected : rank {r} and rank "
                                        f"{1 - r} both on CUDA device 1000", "init.cc:573"),
                     rec(pid, pid + 46, "INFO init.cc:840 -> 5"),
                     rec(pid, pid + 46, "INFO group.cc:73 -> 5 [Async thread]")])
           for r, pid in ((1, 241), (0, 240))]
    code, d = check(tmp_path, ["> sh train.sh " + " ".join(init), ">", "> " + dup[0], ">",
                               "> " + dup[1] + " Traceback (most recent call last):"])
    assert d["transport"] == "none" and len(d["ranks"]) == 2, d["summary"]
    assert all(r["selected"] == "socket" and "Duplicate GPU" in r["local_failure"]
               for r in d["ranks"]), d["ranks"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]]
    # two processes' records where a glued name shows a splice still keep only the last
    spliced = " ".join([rec(240, 240, "INFO comm 0x5 rank 0 nr") + "c" + rec(
        241, 241, "INFO Using network IB"), rec(241, 241, "INFO NET/IB : Using [0]mlx5_0:1/IB")])
    code, d = check(tmp_path, [spliced])
    assert [r["pid"] for r in d["ranks"]] == [241], d["summary"]


def test_a_cuda_fault_freeing_a_destroyed_communicator_is_no_init_failure(tmp_path):
    # nccl-tests#24 (NCCL 2.4, two hosts): both ranks' IB links fail with error 12 in the
    # proxy thread while the test runs; one process then destroys its communicator and
    # hits a CUDA fault freeing the other GPU's, passed up through init.cu: teardown, not
    # an init that failed. Both ranks ran on IB, and their links broke.
    lines = []
    for h, pid, rank in (("gpu5", 35917, 4), ("gpu4", 35902, 0)):
        lines += [*L.warn(h, pid, 0, "NET/IB : Got completion with error 12, opcode 1, len 0, "
                                     "vendor err 129", where="transport/net_ib.cu:788"),
                  L.info(h, pid, 0, "include/net.h:34 -> 2"),
                  L.info(h, pid, 0, "transport.cu:163 -> 2 [Proxy Thread]")]
    lines += [L.info("gpu5", 35917, 0, "Destroyed comm 0x7f24c4001af0 rank 4"),
              *L.warn("gpu5", 35917, 1, "Cuda failure 'an illegal memory access was "
                                        "encountered'", where="init.cu:194"),
              L.info("gpu5", 35917, 1, "init.cu:1143 -> 1")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["verdict"] != "failed", d["summary"]
    assert all(r["link_error"] for r in d["ranks"]), d["ranks"]
    # the same chain with no teardown before it is the init failing
    code, d = check(tmp_path, [x for x in lines if "Destroyed" not in x])
    assert d["transport"] == "failed", d["summary"]


def test_a_proxy_thread_error_after_a_socket_write_is_the_socket_transport(tmp_path):
    # nccl#193 (NCCL 2.3, Kubernetes pods over flannel, no IB): a WARN-only paste; the proxy
    # thread (which runs the network transports) failed after a socket write
    h, pid = "worker0-0d9gnb", 15
    lines = [f"{h}:{pid}:91 [3] include/socket.h 398 NCCL WARN Call to write failed : "
             "Connection reset by peer.",
             f"{h}:{pid}:91 [3] transport.cu:153 NCCL WARN transport.cu:153 ->2 [Proxy thread error]"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket" and code == 1, d["summary"]
    # after an IB error it stays IB's
    ib = [f"{h}:{pid}:91 [3] transport/net_ib.cu:789 NCCL WARN NET/IB : Got completion with "
          "error 12, opcode 1, len 0, vendor err 129", lines[1]]
    code, d = check(tmp_path, ib)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


def test_nccl_2_3_device_list_lines_choose_ib(tmp_path):
    # pytorch#43258 (NCCL 2.3 era): after the sideband line, the HCAs IB found, one per line
    h, pid = "dgx-s12", 4402
    lines = [L.info(h, pid, 0, m) for m in ("NET/IB : Using interface ib0 for sideband communication",
                                            "NET/IB: [0] mlx5_64:1/IB ", "NET/IB: [1] mlx5_65:1/IB ")]
    code, d = check(tmp_path, lines)
    assert d["selected"] == "ib" and d["ranks"][0]["ib_devices"] == ["mlx5_64:1", "mlx5_65:1"], \
        d["summary"]
    # the sideband line alone is no choice (horovod#685: then no device, then Socket)
    code, d = check(tmp_path, lines[:1])
    assert d["selected"] == "none", d["summary"]


def test_a_shm_failure_in_a_job_across_nodes_was_trying_its_network(tmp_path):
    # a W&B log: channels over NET/Socket between two hosts, then shm's CUDA failure on one
    # rank: the job failed, trying sockets
    lines = [L.info("gpu-w1", 880, 0, "Channel 00 : 1[1a000] -> 0[1a000] [receive] via NET/Socket/0"),
             L.info("gpu-w2", 912, 0, "Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/Socket/0"),
             *L.warn("gpu-w1", 880, 0, "Cuda failure 'invalid argument'", where="include/shm.h:42"),
             L.info("gpu-w1", 880, 0, "transport/shm.cc:193 -> 1")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]


def _split_comm_fails_in_node(streams: list[list[str]], gpn: int, using: str | None) -> list[str]:
    """Each rank's lines, then a within-node communicator of its node (`nNodes 1`) whose
    P2P setup ran out of GPU memory, with the chain up to group.cc; NCCL >= 2.19 prints
    `Using network X` again for it first (`using`)."""
    lines = []
    for r, stream in enumerate(streams):
        host, pid, _ = stream[0].split(" ")[0].split(":")
        local = r % gpn
        lines += stream + ([L.info(host, int(pid), local, f"Using network {using}")]
                           if using else []) + [
            L.info(host, int(pid), local, f"comm 0x77{r} rank {local} nRanks {gpn} nNodes 1 "
                   f"localRanks {gpn} localRank {local} MNNVL 0"),
            *L.warn(host, int(pid), local, "Cuda failure 'out of memory'",
                    where="transport/p2p.cc:275"),
            *[L.info(host, int(pid), local, c) for c in (
                "transport/p2p.cc:343 -> 1", "transport.cc:183 -> 1", "init.cc:1263 -> 1",
                "group.cc:64 -> 1 [Async thread]")]]
    return lines


@pytest.mark.parametrize("using", ["AWS Libfabric", None])
def test_a_split_that_fails_in_the_node_after_the_world_ran_on_the_network(tmp_path, using):
    # the job's communicator across 2 nodes completed its init over OFI/cxi; then a
    # communicator within each node (a tensor-parallel group, `nNodes 1`) ran out of GPU
    # memory setting P2P up: the network carried the job's communicator and did not fail
    lines = _split_comm_fails_in_node(job(L.ofi_cxi_rank, nodes=2, gpn=2), gpn=2, using=using)
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and d["attempted"] is None, \
        d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["ofi"] * 4
    assert all(r["local_failure"] == "Cuda failure 'out of memory'" and r["failure"] is None
               for r in d["ranks"])
    assert "init-failed-in-node" in [w["code"] for w in d["warnings"]]
    assert "NCCL init failed within the node on 4/4 ranks" in d["summary"]
    # ... where no communicator had completed its init on it, the job failed while it was
    # setting its network up (as in the W&B log above)
    cut = [x for x in lines if "Init COMPLETE" not in x]
    code, d = check(tmp_path, cut)
    assert d["transport"] == "failed" and d["attempted"] == "ofi" and code == 1, d["summary"]
    # ... and so where the communicator that failed spanned the nodes, and was setting up
    # the network too
    across = [x.replace("nNodes 1", "nNodes 2") for x in lines]
    code, d = check(tmp_path, across)
    assert d["transport"] == "failed" and d["attempted"] == "ofi" and code == 1, d["summary"]


@pytest.mark.parametrize("prefix", ["[{r}]<stdout>:", "worker-{r}: [default0]:"])
def test_a_glued_launcher_prefix_keeps_the_version_line(tmp_path, prefix):
    # horovodrun --gloo (`[0]<stdout>:NCCL version ...`), pdsh in front of torchrun --tee:
    # the version was lost, and NCCL 2.4's bootstrap NET/Socket line then read as a choice
    lines = []
    for r, (h, pid) in enumerate((("node01", 150770), ("node03", 34537))):
        pre = prefix.format(r=r)
        lines += [pre + "NCCL version 2.4.7+cuda10.0"] if r == 0 else []
        lines += [pre + L.info(h, pid, 0, m) for m in (
            f"NET/Socket : Using [0]ib0:10.3.0.{r + 1}<0>",
            "NET/Plugin : No plugin found (libnccl-net.so).",
            f"NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.3.0.{r + 1}<0>")]
    code, d = check(tmp_path, lines)
    assert d["nccl_version"] == "2.4.7" and d["transport"] == "ib" and d["mixed"] is False, \
        d["summary"]


def test_a_pid_tid_prefix_without_its_host_is_read(tmp_path):
    # pytorch#49095: `78244:78244 [0] NCCL INFO ...` (the host cut from NCCL's prefix; not
    # srun's `3: ` label)
    lines = ["78244:78465 [0] NCCL INFO Using network IB",
             "78244:78465 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0",
             "78301:78502 [0] NCCL INFO Using network IB",
             "78301:78502 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]
    assert sorted(r["rank"] for r in d["ranks"]) == [0, 1]


def test_log_records_of_several_lines_and_search_responses_are_read_line_by_line(tmp_path):
    # A log shipper's record holds several of a process's lines joined by `\n`; a search
    # engine's response holds several records on one line; a downloaded export pretty-prints
    # each record's fields one per line. Only the last line, the first record, or nothing
    # was read (a WARN before a channel line was lost)
    import json as _json
    h, pid = "trainer-w3", 987
    warn = (f"{h}:{pid}:1301 [7] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
            "from peer 10.8.4.2<55921> with status=12 opcode=1 len=0 vendor err 129 (Send)")
    chan = f"{h}:{pid}:1260 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IB/2"
    done = f"{h}:{pid}:1260 [7] NCCL INFO comm 0x5e rank 47 nranks 64 cudaDev 7 busId 1b000 - Init COMPLETE"
    hit = lambda msg: {"_source": {"kubernetes": {"pod": h}, "message": msg}}
    response = _json.dumps({"hits": {"hits": [hit(chan + "\n" + done), hit(warn)]}})
    code, d = check(tmp_path, [response])
    assert d["transport"] == "ib" and "status=12" in d["ranks"][0]["link_error"], d["summary"]
    # a pretty-printed export: `"textPayload": "...\n"` on its own line
    pretty = ["[", "  {", '    "textPayload": ' + _json.dumps(f"{h}:{pid}:{pid} [7] NCCL INFO "
                                                          "Using network IB\n") + ",",
              '    "severity": "INFO"', "  }", "]"]
    code, d = check(tmp_path, pretty)
    assert d["selected"] == "ib" and [r["host"] for r in d["ranks"]] == [h], d["summary"]


def test_one_host_where_a_process_drives_several_gpus_or_calls_itself_localhost(tmp_path):
    # nccl#262 (one process, four GPUs, NCCL 2.4.8, Socket chosen), nccl#1637 (two ranks on
    # `localhost`): one machine, nothing crossed nodes. A proxy thread's WARN under another
    # device (nccl#733, a rank of a job across nodes) is no second GPU of its process.
    h, pid = "aliyun", 82174
    lines = [L.info(h, pid, 0, "Bootstrap : Using [0]eth0:192.168.0.172<0>"),
             L.info(h, pid, 0, "NET/Socket : Using [0]eth0:192.168.0.172<0>"),
             "NCCL version 2.4.8+cuda9.0",
             *[L.info(h, pid, d, f"CUDA Dev {d}[{d}], Socket NIC distance :  PHB", tid=pid + d)
               for d in range(4)]]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["selected"] == "socket" and d["inter_node"] is False, \
        d["summary"]
    local = [L.info("localhost", p, r, m) for r, p in enumerate((4101, 4102)) for m in (
        "Bootstrap : Using enp5s0:192.168.1.20<0>", "Using network Socket")]
    code, d = check(tmp_path, local)
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    k9s = [L.info("task-7701-z5h6w", 73, 1, "Using network IB", tid=91),
           *L.warn("task-7701-z5h6w", 73, 0, "NET/IB : Got completion from peer 10.0.0.9<4> "
                   "with error 12, opcode 0, len 0, vendor err 129", where="transport/net_ib.cc:881")]
    code, d = check(tmp_path, k9s)
    assert d["inter_node"] is None and d["transport"] == "ib", d["summary"]
    assert d["ranks"][0]["link_error"] and len(d["ranks"]) == 1


def test_a_links_first_completion_error_is_the_cause(tmp_path):
    # DeepSpeed#6875: error 12 (retry exceeded), then status 5 (flushed) for each request
    # still queued; the first names the cause
    h, pid = "dgx-07", 3391
    lines = [L.info(h, pid, 0, "Using network IB"),
             L.info(h, pid, 0, "comm 0x5e1 rank 1 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE")]
    for status in (12, 5, 5):
        lines += L.warn(h, pid, 0, f"NET/IB: Got completion from peer 10.0.1.23<47140> with "
                        f"status={status} opcode=0 len=0 vendor err 129 (Recv) hca ibp152s0",
                        where="transport/net_ib.cc:1736")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib", d["summary"]
    assert "status=12" in d["ranks"][0]["link_error"]
    assert "status=12" in next(w["message"] for w in d["warnings"] if w["code"] == "link-failed")


def test_a_p2p_failure_under_a_pidless_prefix_is_init_failing_in_the_node(tmp_path):
    # ROCm/rccl#2188 (MI350X, one node): the reporter cut `host:pid:tid` to `node [N]`; the
    # ranks whose hipIpcGetMemHandle failed printed no network line, and were dropped: the
    # job read `socket` (the one rank that chose it). Init failed within the node, and
    # nothing shows traffic between nodes: no network's failure, and no rank's network
    lines = ["node [0] NCCL INFO Using network Socket",
             "node [1] /app/rccl/src/transport/p2p.cc:256 NCCL WARN hipIpcGetMemHandle failed : "
             "invalid argument", "node [1] [FATAL ERROR]: HIP failure: 'invalid argument'",
             *[f"node [1] NCCL INFO /app/rccl/src/{c}" for c in (
                 "transport/p2p.cc:709 -> 1", "transport.cc:182 -> 1",
                 "transport/generic.cc:25 -> 1")]]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["attempted"] is None, d["summary"]
    assert "hipIpcGetMemHandle failed" in next(r["local_failure"] for r in d["ranks"]
                                               if r["local_failure"])
    assert "NCCL init failed within the node on 1/2 ranks: hipIpcGetMemHandle" in d["summary"]
    assert "init-failed-in-node" in [w["code"] for w in d["warnings"]]


def test_a_topology_attribute_missing_fails_init_without_a_chain(tmp_path):
    # Azure's node health check on one VM: `graph/xml.h:85 NCCL WARN Attribute busid of node
    # nic not found` (init returns an internal error; "nccl_allreduce returned error code
    # 3"), the paste holding no chain after it; the same words at INFO are no failure
    h = "elsah100"
    lines = [L.info(h, 186, 6, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.1.0.4<0>"),
             *L.warn(h, 176, 1, "Attribute busid of node nic not found", where="graph/xml.h:85")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and code == 1, d["summary"]
    code, d = check(tmp_path, [lines[0], L.info(h, 186, 6, "Attribute busid of node nic not found")])
    assert d["transport"] == "ib", d["summary"]


@pytest.mark.parametrize("wording", ["shm.h", "shmutils.cc"])
def test_a_full_dev_shm_is_no_network_failure(tmp_path, wording):
    # Paddle#55987 (NCCL 2.8.4 in a container with Docker's 64 MB /dev/shm), kserve#3791
    # (shmutils.cc): creating the shared memory segment failed, and transport.cc passed it
    # on. Init failed within the node; no network was being tried, whatever `Using network`
    # said: none, with the failure in its own field, warning and summary (helpers of rounds
    # 20-29 read it so; stops 22-26 said failed, nothing attempted)
    h, pid = "196d1db4e5fe", 15374
    if wording == "shm.h":
        bad = L.warn(h, pid, 3, "Error while creating shared memory segment nccl-shm-recv-"
                     "a6fd15028d324d0c-0-3-0 (size 9637888)", where="include/shm.h:48")
        chain = ["transport/shm.cc:101 -> 2", "transport.cc:30 -> 2"]
    else:
        bad = L.warn(h, pid, 3, "Error: failed to extend /dev/shm/nccl-H1dBqY to 9637892 bytes",
                     where="misc/shmutils.cc:72")
        chain = ["transport/shm.cc:114 -> 2", "transport.cc:33 -> 2", "init.cc:1026 -> 2"]
    lines = [L.info(h, pid, 3, "Using network Socket"), *bad,
             *[L.info(h, pid, 3, c) for c in chain]]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["ranks"][0]["selected"]) == ("none", "socket"), d["summary"]
    assert bad[1].split("NCCL WARN ")[1] == d["ranks"][0]["local_failure"], d["ranks"][0]
    assert not d["ranks"][0]["failure"] and "init-failed-in-node" in [
        w["code"] for w in d["warnings"]]
    # ... also after `Using network IB`
    code, d = check(tmp_path, [x.replace("network Socket", "network IB") for x in lines])
    assert d["transport"] == "none" and d["ranks"][0]["local_failure"], d["summary"]
    # in a job that crossed nodes (its nNodes says so) it failed the network it was setting
    # up: that job's init failed, trying the network it chose
    code, d = check(tmp_path, [L.info(h, pid, 3, "comm 0x1 rank 3 nRanks 8 nNodes 2 localRanks 4 "
                                                 "localRank 3 MNNVL 0")] + lines)
    assert (d["transport"], d["attempted"]) == ("failed", "socket"), d["summary"]
    assert not d["ranks"][0]["local_failure"]
    # while a network's error passed on by transport.cc is still the network's
    net = L.warn(h, pid, 3, "Call to ibv_create_cq failed", where="transport/net_ib.cc:402")
    lines = [L.info(h, pid, 3, "Using network IB"), *net,
             *[L.info(h, pid, 3, c) for c in ("transport/net_ib.cc:640 -> 2",
                                               "transport.cc:30 -> 2")]]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


def test_a_link_that_broke_after_init_is_the_transport_the_job_ran_on(tmp_path):
    # A link that broke while the job ran, its error passed up the chain (a paste may stop at
    # transport/net.cc, before the progress thread's link): the job chose IB and ran on it;
    # the link-failed warning says how it ended. (Stops 21-23 read IB, stops 24-25 failed
    # after init; rounds 24 and 25 of real logs, eight logs from seven helpers, read the
    # network the job ran on, as the issue's `failed` is an init that failed.)
    streams = job(L.ib_rank)
    for r, s in enumerate(streams):
        h, pid = L.rank_host(r), 40000 + 17 * r
        s += L.warn(h, pid, r % 4, "NET/IB : Got completion from peer 10.1.0.2<42> with status=12 "
                    "opcode=0 len=0 vendor err 129 (Recv)", where="transport/net_ib.cc:1696")
        s.append(L.info(h, pid, r % 4, "transport/net.cc:1316 -> 6"))
    code, d = check(tmp_path, L.interleave(streams, 0), "--fabric", "infiniband")
    assert d["transport"] == "ib" and code == 0, d["summary"]
    assert all("status=12" in r["link_error"] and not r["failed_after_init"]
               for r in d["ranks"])
    w = next(w["message"] for w in d["warnings"] if w["code"] == "link-failed")
    assert w.startswith("a link broke while the job ran on it, on 8/8 ranks")
    assert "; then a link broke on 8/8 ranks: NET/IB : Got completion" in d["summary"]
    # the WARN alone (a cut paste, a hung job: nccl#733) the same
    streams = [s[:-1] for s in streams]
    code, d = check(tmp_path, L.interleave(streams, 0), "--fabric", "infiniband")
    assert d["transport"] == "ib" and all(r["link_error"] for r in d["ranks"]), d["summary"]
    # an error passed up to init after it: the link broke while init set it up
    early = [s[:-1] + [L.info(L.rank_host(r), 40000 + 17 * r, r % 4, c) for c in (
        "transport/net.cc:1316 -> 6", "init.cc:1292 -> 6")] for r, s in enumerate(
        [x[:next(i for i, y in enumerate(x) if "Init COMPLETE" in y)] + x[-2:]
         for x in streams])]
    code, d = check(tmp_path, L.interleave(early, 0), "--fabric", "infiniband")
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1, d["summary"]
    # ... and a WARN of a running job that is no completion error (an async event) does not
    streams = [s[:-1] + L.warn(L.rank_host(r), 40000 + 17 * r, r % 4,
                               "NET/IB : Got async event : GID table change",
                               where="transport/net_ib.cc:84")
               for r, s in enumerate(streams)]
    code, d = check(tmp_path, L.interleave(streams, 0), "--fabric", "infiniband")
    assert d["transport"] == "ib" and code == 0, d["summary"]
    assert all(r["nccl_warnings"] for r in d["ranks"])


RUNTIME_FAULTS = {  # (WARN text, where, error chain): errors of a running job, not its network
    "cuda": ("Cuda failure 'an illegal memory access was encountered'", "enqueue.cc:1556",
             ["enqueue.cc:1620 -> 1", "group.cc:188 -> 1", "group.cc:412 -> 1"]),
    "argument": ("AllReduce : invalid type 13", "enqueue.cc:1962",
                 ["enqueue.cc:2020 -> 4", "group.cc:188 -> 4", "group.cc:106 -> 4"]),
    "teardown": ("Cuda failure 'unspecified launch failure'", "init.cc:204",
                 ["init.cc:990 -> 1"]),
    "sub-comm-oom": ("Cuda failure 'out of memory'", "init.cc:1120",
                     ["init.cc:1450 -> 1", "init.cc:1801 -> 1", "group.cc:64 -> 1 [Async thread]"]),
}


@pytest.mark.parametrize("fault", sorted(RUNTIME_FAULTS))
@pytest.mark.parametrize("fn,want", [(L.ib_rank, "ib"), (L.ofi_cxi_rank, "ofi")])
def test_a_job_fault_after_init_complete_is_not_a_network_failure(tmp_path, fault, fn, want):
    # The network was set up (Init COMPLETE); then a CUDA fault, a bad argument or a later
    # communicator's CUDA OOM returns through group.cc/init.cc: the job used the network.
    text, where, chain = RUNTIME_FAULTS[fault]
    streams = job(fn)
    for r, s in enumerate(streams):
        if r == 1 or fault == "sub-comm-oom":
            h, pid = L.rank_host(r), 40000 + 17 * r
            s += L.warn(h, pid, r % 4, text, where=where)
            s += [L.info(h, pid, r % 4, c) for c in chain]
    code, d = check(tmp_path, L.interleave(streams, 4))
    assert d["transport"] == want and d["attempted"] is None and code == 0, d["summary"]
    assert {r["transport"] for r in d["ranks"]} == {want}


def test_a_network_error_after_init_complete_still_fails(tmp_path):
    # NCCL >= 2.22 connects at the first collective, after Init COMPLETE: a connection that
    # cannot be set up then is the network failing.
    streams = job(L.ib_rank, nccl="2.23.4")
    h, pid = L.rank_host(1), 40017
    streams[1] += L.warn(h, pid, 1, "Call to ibv_modify_qp failed with error No such device",
                         where="transport/net_ib.cc:1106")
    streams[1] += [L.info(h, pid, 1, c) for c in (
        "transport/net_ib.cc:1196 -> 2", "transport/net.cc:840 -> 2", "group.cc:412 -> 2")]
    code, d = check(tmp_path, L.interleave(streams, 4))
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1, d["summary"]
    assert [r["transport"] for r in d["ranks"]].count("failed") == 1


@pytest.mark.parametrize("version", ["", " v6", " v8", " v10"])
@pytest.mark.parametrize("ib_lines", [True, False])
def test_hpcx_plugin_named_by_its_own_name_is_ib(tmp_path, version, ib_lines):
    # HPC-X's nccl-rdma-sharp plugin: `Using network NCCL RDMA Plugin v8` and channels
    # `via NET/NCCL RDMA Plugin v8/0/GDRDMA`, with or without NCCL's own NET/IB lines.
    name = "NCCL RDMA Plugin" + version
    streams = job(L.ib_rank, nccl="2.21.5", net_name=name, nnodes=2)
    if not ib_lines:
        streams = [[x for x in s if "NET/IB :" not in x] for s in streams]
    code, d = check(tmp_path, L.interleave(streams, 2), "--fabric", "infiniband")
    assert d["transport"] == "ib" and d["verdict"] == "fast" and code == 0, d["summary"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]]
    assert {r["network"] for r in d["ranks"]} == {name}


def test_the_proxy_socket_echo_of_an_ib_failure_is_not_the_transport_tried(tmp_path):
    # `ibv_modify_qp` fails, the chain runs through net_ib.cc and the proxy; then the proxy's
    # own socket reports the closed connection: the transport tried was IB.
    streams = job(L.ib_rank, nccl="2.19.3", channels=False, comm=False)
    for r, s in enumerate(streams):
        h, pid, d = L.rank_host(r), 40000 + 17 * r, r % 4
        s += L.warn(h, pid, d, "Call to ibv_modify_qp failed with error Network is unreachable",
                    where="misc/ibvwrap.cc:187")
        s += [L.info(h, pid, d, c) for c in ("transport/net_ib.cc:579 -> 2",
                                             "transport/net.cc:728 -> 2", "proxy.cc:1306 -> 2")]
        s += L.warn(h, pid, d, "socketProgress: Connection closed by remote peer x<38812>",
                    where="misc/socket.cc:49")
        s += L.warn(h, pid, d, "Socket recv failed while polling for opId=0x7f31a81c25e0",
                    where="proxy.cc:1143")
        s += [L.info(h, pid, d, c) for c in ("transport/net.cc:362 -> 3", "init.cc:1358 -> 3",
                                             "group.cc:65 -> 3 [Async thread]")]
    code, d = check(tmp_path, L.interleave(streams, 1))
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1, d["summary"]
    assert "ibv_modify_qp" in d["summary"], d["summary"]


def test_a_net_ib_warning_shows_ib_in_use_without_a_selection_line(tmp_path):
    # A paste that starts after init: only bootstrap lines, then runtime completion errors.
    lines = []
    for r in range(4):
        h, pid = f"tarn{r // 2 + 1}", 31000 + r
        lines.append(L.info(h, pid, r % 2, f"Bootstrap : Using ib0:10.7.41.{r // 2 + 1}<0>"))
        lines.append(L.info(h, pid, r % 2, f"comm 0x7a{r:02x} rank {r} nranks 4 cudaDev {r % 2} "
                                           "busId 1000 - Init COMPLETE"))
    for r in (0, 2):
        h, pid = f"tarn{r // 2 + 1}", 31000 + r
        lines += L.warn(h, pid, 0, f"NET/IB : Got completion from peer 10.7.41.{2 - r // 2}<50112> "
                        "with error 4, opcode 5327, len 5327, vendor err 81 (Recv)",
                        where="ib_plugin.c:1105")
    code, d = check(tmp_path, lines)
    # (the link broke after Init COMPLETE: the job ran on IB)
    assert d["transport"] == "ib" and code == 0, d["summary"]
    assert [r["rank"] for r in d["ranks"] if r["link_error"]] == [0, 2]
    # a selection line still wins over it
    lines.append(L.info("tarn1", 31000, 0, "Using network Socket"))
    lines.append(L.info("tarn2", 31002, 0, "Using network Socket"))
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket", d["summary"]


@pytest.mark.parametrize("esc", ["ESC", "\u2190", "", "^["])
def test_a_colour_code_pasted_as_text_is_not_part_of_the_network_name(tmp_path, esc):
    # Ray's dedup suffix in green, its ESC shown as text (`ESC`, Windows' `\u2190`, `^[`) or
    # dropped (vLLM#5405, #11139): `Using network Socket[32m [repeated 7x across cluster][0m`
    lines = []
    for r, h in enumerate(("vllm-0-0", "vllm-0-1")):
        pid = 194 + r
        pre = f"(RayWorkerWrapper pid={pid}, ip=10.0.130.{20 + r}) "
        lines += [pre + L.info(h, pid, 0, m) for m in (
            f"Using network Socket{esc}[32m [repeated 7x across cluster]{esc}[0m",
            f"comm 0x2c7cef6{r} rank {8 * r} nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["inter_node"] is True, d["summary"]
    assert "unknown-network" not in {w["code"] for w in d["warnings"]}


def test_ray_dedup_suffix_is_not_part_of_the_network_name(tmp_path):
    streams = job(L.socket_rank, iface="eth0")
    lines = [x + " [repeated 15x across cluster]" if x.endswith("Using network Socket") else x
             for x in L.interleave(streams, 1)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket"
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]


@pytest.mark.parametrize("edge", ["\u2502", "\u2503"])
def test_a_terminal_viewers_box_is_not_part_of_the_lines(tmp_path, edge):
    # k9s shows a pod's log in a box: `│ <line>` right-padded to the width, then `│`.
    lines = [f"{edge} {x:<150}{edge}" for x in L.interleave(job(L.ib_rank, nccl="2.10.3"), 2)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["nccl_version"] == "2.10.3", d["summary"]
    assert {r["network"] for r in d["ranks"]} == {"IB"}
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]
    v = analyse(lines).to_dict()  # line by line (feed) as in blocks
    assert {k: v[k] for k in ("transport", "nccl_version", "warnings")} == {
        k: d[k] for k in ("transport", "nccl_version", "warnings")}


@pytest.mark.parametrize("group,mark", [(True, "#"), (False, "#"), (True, "")])
def test_nccl_tests_rank_table_tells_one_host_from_several(tmp_path, group, mark):
    # `all_reduce_perf -g 4`: one process drives four GPUs and prints no rank lines; the
    # table nccl-tests prints first lists every rank's host. (mark "": a page rendered the
    # paste as markdown, and its `#` lines became headings without the `#`.)
    def table(hosts):
        g = "Group  0 " if group else ""
        return [f"{mark} Using devices".strip()] + [
            (f"{mark}  " if mark else "") + f"Rank {r:2d} {g}Pid {802211 + r // 4:6d} on {h} "
            f"device {r % 4:2d} [0x{r:02x}] NVIDIA A100-PCIE-40GB" for r, h in enumerate(hosts)]

    def process(host, pid):
        out = [L.info(host, pid, 0, "Bootstrap : Using eth0:172.16.9.58<0>")]
        for dev in range(4):
            out += [L.info(host, pid, dev, m, tid=pid + 29 + dev) for m in (
                "NET/Socket : Using [0]eth0:172.16.9.58<0>", "Using network Socket")]
        return out

    code, d = check(tmp_path, table(["gpu-a05"] * 4) + process("gpu-a05", 802211))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # the same paste without the table: one process drives four GPUs on one host and no
    # link crosses nodes; the real pastes of this shape were all of one box (round 23)
    code, d = check(tmp_path, process("gpu-a05", 802211))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # two hosts in the table: inter-node, though only one host's lines were pasted
    code, d = check(tmp_path, table(["gpu-a05"] * 4 + ["gpu-a06"] * 4)
                    + process("gpu-a05", 802211))
    assert d["transport"] == "socket" and d["inter_node"] is True and d["nodes"] == 2


def test_two_machines_of_one_name_are_two_nodes(tmp_path):
    # Two cloud VMs both called `ubuntu` (nccl-tests#166's shape), `-g 4` each: the table
    # lists one host name, but each process bootstraps from its own address.
    def table():
        return ["# Using devices"] + [
            f"#  Rank {r:2d} Group  0 Pid {(48811, 5120)[r // 4]:6d} on ubuntu device {r % 4:2d} "
            "[0x00] NVIDIA A100-SXM4-40GB" for r in range(8)]

    def process(pid, ip, complete):
        out = [L.info("ubuntu", pid, 0, f"Bootstrap : Using ens4:{ip}<0>")]
        for dev in range(4):
            out += [L.info("ubuntu", pid, dev, m, tid=pid + 29 + dev) for m in (
                f"NET/Socket : Using [0]ens4:{ip}<0>", "Using network Socket")]
            if complete:
                r = dev + (4 if pid == 5120 else 0)
                out.append(L.info("ubuntu", pid, dev, f"comm 0x55{r:02d} rank {r} nranks 8 "
                                  f"cudaDev {dev} busId {dev}0000 - Init COMPLETE"))
        return out

    for complete in (True, False):
        lines = process(48811, "10.0.0.1", complete) + process(5120, "10.0.0.2", complete)
        code, d = check(tmp_path, table() + lines)
        assert d["transport"] == "socket" and d["inter_node"] is True, d["summary"]
        assert d["nodes"] == 2
        code, d = check(tmp_path, lines)  # no table: the comm lines hold every rank
        assert d["transport"] == "socket" and d["nodes"] == 2, d["summary"]
        assert d["inter_node"] is (True if complete else None)
    # the same two processes at one address are one machine
    lines = process(48811, "10.0.0.1", True) + process(5120, "10.0.0.1", True)
    code, d = check(tmp_path, table() + lines)
    assert d["transport"] == "none" and d["nodes"] == 1, d["summary"]


def test_a_rank_that_fails_before_naming_a_network_attempted_the_jobs(tmp_path):
    # Lightning-AI/pytorch-lightning#14986's shape: every other rank chose IB, and rank 0's
    # bootstrap root thread reports a rank launched twice before rank 0 names a network.
    streams = job(L.ib_rank, nodes=2, gpn=4, comm=False, channels=False)
    streams[0] = streams[0][:2] + L.warn(
        L.rank_host(0), 40000, 0, "Bootstrap Root : rank 1 of 8 ranks has already checked in",
        where="bootstrap.cc:131")
    code, d = check(tmp_path, L.interleave(streams, 2))
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code != 0, d["summary"]
    assert "while trying ib" in d["warnings"][0]["message"], d["warnings"]
    failed = [r for r in d["ranks"] if r["transport"] == "failed"]
    assert len(failed) == 1 and failed[0]["attempted"] is None  # its own lines name none


def _old_chain(host, pid, dev, files):
    return [f"{host}:{pid}:{pid + 107} [{dev}] INFO {f} -> 2" for f in files]


@pytest.mark.parametrize("where", ["include/socket.h:194", "misc/ibvwrap.cu:60",
                                   "transport/net_ib.cc:555"])
def test_nccl_2_2_warn_without_the_word_nccl(tmp_path, where):
    # NCCL <= 2.2 wrote `host:pid:tid [dev] file:line WARN msg` (horovod#210's shape): the
    # WARN, then a chain through net_ib to init: failed while trying IB
    lines = []
    for h, pid in (("gpu-svr27", 3123), ("gpu-svr28", 5120)):
        lines += [f"{h}:{pid}:{pid} [0] INFO NET : Using interface eno1:10.9.0.{pid % 7}<0>",
                  f"{h}:{pid}:{pid + 107} [0] {where} WARN Call to recv failed : "
                  "Connection reset by peer"]
        lines += _old_chain(h, pid, 0, ["transport/net_ib.cu:555", "include/net.h:30",
                                        "bootstrap.cu:169", "init.cu:542"])
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code != 0, d["summary"]
    assert {r["failure"] for r in d["ranks"]} == {"Call to recv failed : Connection reset by peer"}
    # an application's own `... [0] main.c:12 WARN` line without a chain makes no process
    code, d = check(tmp_path, ["12:00:01 [0] main.c:12 WARN low disk space"])
    assert d["ranks"] == [] and d["transport"] == "none"
    # alone in a window of text with no chain (no `>`): found in blocks as line by line
    filler = [f"[rank0]: epoch 1 step {i} loss 0.{i:04d}" for i in range(12000)]
    lines = filler + [f"gpu-svr27:3123:3230 [0] {where} WARN Call to recv failed : "
                      "Connection reset by peer"] + filler
    code, d = check(tmp_path, lines)
    assert [r["host"] for r in d["ranks"]] == ["gpu-svr27"], d["summary"]
    assert [{**r, "sources": []} for r in analyse(lines).to_dict()["ranks"]] == [
        {**r, "sources": []} for r in d["ranks"]]


def test_the_chain_names_the_transport_that_failed(tmp_path):
    # The WARN names no transport (`Call to connect failed`); the chain goes through
    # transport/net_socket (horovod#110). A rank with only a chain and no WARN of its own
    # failed too (horovod#666).
    lines = [L.info("lf-gpu21", 395594, 0, "Using network Socket", tid=395607)]
    lines += L.warn("lf-gpu21", 395594, 0, "Call to connect failed : Connection timed out",
                    where="include/socket.h:361")
    lines += [L.info("lf-gpu21", 395594, 0, m, tid=395607) for m in (
        "transport/net_socket.cu:139 -> 2", "init.cu:490 -> 2")]
    lines += [L.info("lf-gpu22", 27283, 0, m, tid=27549) for m in (
        "transport/net_socket.cu:166 -> 2", "bootstrap.cu:259 -> 2", "init.cu:536 -> 2")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]
    assert [(r["host"], r["transport"], r["attempted"]) for r in d["ranks"]] == [
        ("lf-gpu21", "failed", "socket"), ("lf-gpu22", "failed", "socket")]
    # a chain through the bootstrap alone fails the rank too (its init returned the error:
    # nccl#1176's `bootstrap.cc:77 NCCL WARN Message truncated`), but names no transport
    code, d = check(tmp_path, [L.info("lf-gpu23", 7, 0, m) for m in (
        "bootstrap.cu:259 -> 2", "init.cu:536 -> 2")])
    assert d["transport"] == "failed" and d["attempted"] is None, d["summary"]
    # ... and a probing link alone (include/net.h) is no failure
    code, d = check(tmp_path, [L.info("lf-gpu23", 7, 0, m) for m in (
        "include/net.h:24 -> 2", "init.cu:536 -> 2")])
    assert d["transport"] == "none", d["summary"]


def test_a_cut_host_keeps_the_transport_of_its_warn(tmp_path):
    # `[15]23:91:3526` is the tail of `[15]wrk-23:91:3526` (a cut line): its WARN, the only
    # one naming the socket transport, is folded into the whole host's process
    lines = ["[15]" + x for x in (
        L.info("wrk-23", 91, 0, "Bootstrap : Using eth0:100.97.18.23<0>"),
        L.info("wrk-23", 91, 0, "misc/socket.cc:520 -> 2", tid=3526),
        "23:91:3526 [0] transport/net_socket.cc:219 NCCL WARN NET/Socket : socket progress error",
        L.info("wrk-23", 91, 0, "proxy.cc:614 -> 2 [Proxy Thread]", tid=3520),
        L.info("wrk-23", 91, 0, "init.cc:1115 -> 2", tid=3520))]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]
    assert [r["host"] for r in d["ranks"]] == ["wrk-23"]


def test_placeholders_over_nccls_prefix(tmp_path):
    # sglang#4857: the reporter replaced host, pid and tid with `[Node-A]:[PID]:[Thread]`
    def lines(msg):
        return [f"[Node-{n}]:[PID]:[Thread] [0] NCCL WARN {msg}" for n in "AB"] + [
            f"[Node-{n}]:[PID]:[Thread] [0] NCCL INFO transport/net.cc:1302 -> 6" for n in "AB"]

    code, d = check(tmp_path, lines("NET/IB : ibv_modify_qp failed with error Network is "
                                    "unreachable"))
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    assert sorted(r["host"] for r in d["ranks"]) == ["Node-A", "Node-B"]
    code, d = check(tmp_path, lines("NET/IB : Got completion from peer [PRIVATE_IP] with error "
                                    "12, opcode 0, len 0, vendor err 129 (Recv)"))
    assert d["transport"] == "ib" and all(r["link_error"] for r in d["ranks"]), d["summary"]


@pytest.mark.parametrize("nnodes", [1, 2])
def test_a_gpu_to_gpu_setup_failure_on_one_node_is_no_network_failure(tmp_path, nnodes):
    # ROCm/rccl#1454: RCCL >= 2.18 prints `Using network Socket` before P2P setup; then
    # hipIpcGetMemHandle fails, the proxy echoes it over its own sockets, init returns.
    streams = []
    for r in range(2):
        h, pid, d = (f"archbox{r if nnodes == 2 else ''}", 44021 + (r if nnodes == 2 else 0), r)
        lines = [L.info(h, pid, d, m, tid=pid + 8) for m in (
            "Using network Socket",
            f"comm 0x5e{r} rank {r} nRanks 2 nNodes {nnodes} localRanks {3 - nnodes} "
            f"localRank {r if nnodes == 1 else 0} MNNVL 0")]
        lines += L.warn(h, pid, d, "hipIpcGetMemHandle failed : invalid argument",
                        where="rccl/build/hipify/src/transport/p2p.cc:235")
        lines += L.warn(h, pid, d, "Socket recv failed while polling for opId=0x7d9e780c40c0",
                        where="rccl/build/hipify/src/proxy.cc:1190")
        lines += [L.info(h, pid, d, m, tid=pid + 8) for m in (
            "rccl/build/hipify/src/init.cc:1585 -> 1",
            "rccl/build/hipify/src/group.cc:68 -> 1 [Async thread]")]
        streams.append(lines)
    code, d = check(tmp_path, L.interleave(streams, 1))
    if nnodes == 1:
        assert d["transport"] == "none" and code == 0, d["summary"]
    else:
        assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]


def test_connect_retries_are_nccl_lines_of_their_process(tmp_path):
    # A Ray job on three pods (round 36), stuck: each rank's `NCCL INFO socketPollConnect:
    # connect returned Connection refused, retrying (30/34) after sleep for 3000 msec`
    # under Ray's `(worker3, rank=3, ...)` prefix, and nothing else of NCCL's. No network
    # was chosen; but these are NCCL's lines, from three hosts: not "NCCL_DEBUG=INFO not
    # set". (NCCL <= 2.18 words it `Call to connect returned Connection refused, retrying`;
    # 2.26 also `socketStartConnect: connect returned Connection timed out, retrying (1/34)`,
    # two Docker hosts in two data centres, round 38.)
    lines = []
    for n, (h, pid) in enumerate((("test-2296-3", 16728), ("test-2296-2", 18759),
                                  ("test-2296-1", 18357))):
        lines.append(f"(worker{n + 1}, rank={n + 1}, pid={pid - 300}, ip=10.105.0.{n + 4}) "
                     + L.info(h, pid, 0, "socketPollConnect: connect returned Connection "
                              "refused, retrying (30/34) after sleep for 3000 msec", tid=pid + 65))
    lines.append(L.info("lrdn1629", 236813, 0, "Call to connect returned Connection refused, "
                        "retrying", tid=236852))
    lines.append(L.info("6e094e9a088e", 147147, 6, "socketStartConnect: connect returned "
                        "Connection timed out, retrying (1/34) after sleep for 100 msec"))
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["nodes"] == 5 and d["nccl_lines"] == 5, d["summary"]
    assert "NCCL_DEBUG" not in d["summary"] and "spans 5 nodes" in d["summary"]


@pytest.mark.parametrize("wording", [
    "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 83000",
    # NCCL >= 2.31 (nccl#1716, MIG partitions): the same fault in its new words
    "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to "
    "enable this configuration."])
@pytest.mark.parametrize("nnodes", [None, 2])
def test_two_ranks_on_one_gpu_is_a_fault_within_the_node(tmp_path, nnodes, wording):
    # pytorch#47885 (NCCL 2.7.8, two TITAN Xp in one box) and horovod#3929: init.cc's
    # `Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 83000` (NCCL finds it
    # among the ranks of one host; ncclInvalidUsage), after `Using network Socket`. No
    # network failed: none, and the warning says what to fix. Where the job crossed nodes
    # (nNodes 2), init failed while the network it chose was being set up, as for shm.
    h = "frodo"
    streams = []
    for r, pid in enumerate((33631, 33793)):
        s = [L.info(h, pid, r, m) for m in ("NET/IB : No device found.",
                                            "NET/Socket : Using [0]eno1:134.58.47.35<0>",
                                            "Using network Socket")]
        if nnodes:
            s.append(L.info(h, pid, r, f"comm 0x7f{r} rank {r} nRanks 4 nNodes {nnodes} "
                                       f"localRanks 2 localRank {r} MNNVL 0"))
        streams.append(s)
    streams[1] += L.warn(h, 33793, 1, wording, where="init.cc:573")
    streams[1] += [L.info(h, 33793, 1, "init.cc:840 -> 5")]
    code, d = check(tmp_path, streams[0] + streams[1])
    if nnodes is None:
        assert d["transport"] == "none" and d["attempted"] is None, d["summary"]
        [w] = [w["message"] for w in d["warnings"] if w["code"] == "init-failed-in-node"]
        assert "two ranks on one GPU" in w and "set_device" in w and "shm" not in w
    else:
        assert (d["transport"], d["attempted"]) == ("failed", "socket"), d["summary"]


@pytest.mark.parametrize("where,warn,advice", [
    # CrowdDet#86: one Docker container, NCCL 2.4.8 on sockets after no libibverbs; topology
    # detection cannot resolve a GPU's PCI path in the container's /sys
    ("misc/topo.cc:22", "Could not find real path of /sys/class/pci_bus/0000:02/../../0000:02:00.0",
     "NCCL_TOPO_FILE"),
    # nccl#520, nccl#577 (p4d, Azure): the ranks' graphs disagree and a ring does not close
    ("graph/rings.cc:38", "Error : ring 2 does not loop back to start (7 != 2)", "host id")])
def test_topology_faults_before_any_connection_are_no_networks(tmp_path, where, warn, advice):
    # Init failed (a chain to init.cc, ncclSystemError or ncclInternalError) in NCCL's own
    # topology or graph code, before any connection: whatever network the rank had chosen,
    # none was being set up. None, where nothing says the job crossed nodes.
    h, pid = "d13186ffee3a", 57
    lines = [L.info(h, pid, 0, "NET/Socket : Using [0]eth0:172.17.0.2<0>")]
    lines += L.warn(h, pid, 0, warn, where=where)
    lines += [L.info(h, pid, 0, m) for m in ("init.cc:876 -> 3", "init.cc:947 -> 3",
                                              "misc/group.cc:69 -> 3 [Async thread]")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"]) == ("none", None), d["summary"]
    [w] = [w["message"] for w in d["warnings"] if w["code"] == "init-failed-in-node"]
    assert advice in w and "shm" not in w, w
    # the same WARN in a job that nNodes says crossed nodes: its init failed while the
    # network it chose was to be set up
    code, d = check(tmp_path, [L.info(h, pid, 0, "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 "
                                                 "localRank 0 MNNVL 0")] + lines)
    assert (d["transport"], d["attempted"]) == ("failed", "socket"), d["summary"]


def test_a_ranks_proxy_client_failing_after_anothers_p2p_fault_is_its_echo(tmp_path):
    # A torchrun job that Slurm put on one node (round 36): P2P's `Cuda failure 101 'invalid
    # device ordinal'` on one rank; on another, its proxy client's sockets to that rank's
    # proxy closed (`socketProgress: Connection closed by remote peer gpu002.cm.cluster`,
    # `ncclProxyClientGetFd call to tpRank 4 ... failed : 6`). No network failed: none.
    h = "gpu002"
    lines = L.warn(h, 704798, 0, "Cuda failure 101 'invalid device ordinal'",
                   where="transport/p2p.cc:275")
    lines += L.warn(h, 704798, 0, "[Service thread] Accept failed Resource temporarily "
                    "unavailable", where="proxy.cc:1632")
    lines += L.warn(h, 704800, 1, "socketProgress: Connection closed by remote peer "
                    "gpu002.cm.cluster<44189>", where="misc/socket.cc:72")
    lines += L.warn(h, 704800, 1, "ncclProxyClientGetFd call to tpRank 4 handle 0x15518002cbb0 "
                    "failed : 6", where="proxy.cc:1208")
    code, d = check(tmp_path, lines)
    assert (d["transport"], code) == ("none", 0), d["summary"]
    assert not any(r["failure"] for r in d["ranks"])
    assert "invalid device ordinal" in d["summary"]
    # the same echo with no fault within the node is still the job's failure
    code, d = check(tmp_path, lines[4:])
    assert d["transport"] == "failed" and code == 1, d["summary"]


@pytest.mark.parametrize("p2p_failed", [True, False])
def test_the_proxys_sockets_closing_after_a_p2p_failure_are_its_echo(tmp_path, p2p_failed):
    # ROCm/rccl#908 (RCCL's own gtest on one MI210 box, NCCL_DEBUG=WARN: no network line):
    # hipIpcGetMemHandle fails in the proxy's service thread, which fails the Setup operation
    # and closes its sockets to the process's other GPU (`socketProgress: Connection closed
    # by remote peer sharbox-ultra<48295>`, its own host). Init failed within the node: none,
    # not a failed network. The same socket WARNs with no fault before them stay a failure.
    h, pid = "sharbox-ultra", 204802
    src = "/home/u/rccl/build/release/hipify/src/"
    lines = []
    for d in (1, 0):
        if p2p_failed:
            lines += L.warn(h, pid, d, "hipIpcGetMemHandle failed : invalid argument",
                            where=src + "transport/p2p.cc:220")
            lines += L.warn(h, pid, d, "Cuda failure 'invalid argument'",
                            where=src + "transport/p2p.cc:222")
        lines += L.warn(h, pid, d, f"[Proxy Service {d}] Failed to execute operation Setup from "
                        f"rank {d}, retcode 1", where=src + "proxy.cc:1524")
    for d, port in ((1, 48295), (0, 35867)):
        lines += L.warn(h, pid, d, f"socketProgress: Connection closed by remote peer {h}<{port}>",
                        where=src + "misc/socket.cc:57")
        lines += L.warn(h, pid, d, "Socket recv failed while polling for opId=0x7fe95066b760",
                        where=src + "proxy.cc:1148")
    code, d = check(tmp_path, ["RCCL version 2.18.3+hip5.5 develop:6ecf771+", *lines])
    if p2p_failed:
        assert (d["transport"], d["attempted"]) == ("none", None), d["summary"]
        assert "init-failed-in-node" in [w["code"] for w in d["warnings"]]
        assert "invalid argument" in d["ranks"][0]["local_failure"]
    else:
        assert d["transport"] == "failed" and code == 1, d["summary"]


def test_init_itself_failing_after_the_choice(tmp_path):
    # NVIDIA/nccl#1029 (pdsh prefixes): IBext chosen, then init.cc's own WARN says CUDA
    # failed, with no chain after it. Advice that init.cc prints is no failure.
    def lines(msg):
        h, pid = "rdma-gpu-worker-1", 2918
        return [f"{h}: " + x for x in [L.info(h, pid, 4, "Using network IBext", tid=4483)]
                + L.warn(h, pid, 4, msg, where="init.cc:263")[1:]]

    code, d = check(tmp_path, lines("Cuda failure 'initialization error'"))
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    code, d = check(tmp_path, lines('Missing "iommu=pt" from kernel command line which can lead '
                                    "to system instablity or hang!"))
    assert d["transport"] == "ib", d["summary"]


def test_a_socket_error_of_the_bootstrap_names_no_transport(tmp_path):
    # NVIDIA/nccl#1612's shape: the bootstrap's own socket fails before any network is
    # chosen; the bootstrap uses sockets whatever the transport, so none was being tried.
    h, pid = "gpu-n3", 71133
    lines = L.warn(h, pid, 0, "socketProgressOpt: Call to recv from 10.2.0.4<43017> failed : "
                   "Connection reset by peer", where="misc/socket.cc:50")
    lines += [L.info(h, pid, 0, m) for m in (
        "misc/socket.cc:752 -> 6", "bootstrap.cc:78 -> 6", "bootstrap.cc:619 -> 6",
        "init.cc:1398 -> 6")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] is None, d["summary"]
    # through the socket transport itself, the chain names it
    lines[3:3] = [L.info(h, pid, 0, "transport/net_socket.cc:322 -> 6")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]


def test_a_socket_helpers_bind_failure_after_the_choice_fails_init(tmp_path):
    # mmdetection#7047: a 2-node job on NCCL 2.8 chose Socket, then its listen socket could
    # not bind; the paste ends there (no chain)
    h, pid = "gpu2", 1653
    lines = [L.info(h, pid, 0, m) for m in (
        "Bootstrap : Using eno2:172.16.30.2<0>", "NET/IB : No device found.",
        "NET/Socket : Using [0]eno2:172.16.30.2<0>", "Using network Socket")]
    bind = L.warn(h, pid, 0, "Call to bind failed : Address already in use",
                  where="include/socket.h:347")
    code, d = check(tmp_path, lines + bind)
    assert d["transport"] == "failed" and d["attempted"] == "socket" and code == 1
    # RAS's own client socket (NCCL >= 2.24) failing to bind is no failure: init goes on
    ras = L.warn(h, pid, 0, "Call to bind failed: Address already in use",
                 timestamp="2025-06-05 10:45:19", where="ras/client_support.cc:160")
    ras += [L.info(h, pid, 0, "RAS failed to establish a client listening socket at "
                              "localhost:28028")]
    code, d = check(tmp_path, lines + ras)
    assert d["transport"] == "socket" and code == 0, d["summary"]


def test_the_socket_helpers_warns_name_no_transport(tmp_path):
    # NCCL_DEBUG=WARN: the bootstrap root saw a mismatch, then every rank's connect to it was
    # refused. misc/socket.cc (os/linux.cc from 2.28) serves the bootstrap, the proxy and
    # every transport's setup: its WARN says a socket failed, not which transport was tried.
    root = L.warn("gpu-r07", 51120, 0, "Bootstrap Root : mismatch in info from procs, nranks "
                  "16 vs 16, nroots 1 vs 1, iroot 0 vs 0, offset 0 vs 1305411586",
                  where="bootstrap.cc:345")
    refused = "connect to 10.40.3.17<41033> returned Connection refused, exceeded error retry " \
              "count after 35 attempts"
    lines = root + L.warn("gpu-r07", 51123, 3, f"ncclOsSocketPollConnect: {refused}",
                          where="os/linux.cc:200")
    lines += L.warn("gpu-r12", 9041, 6, f"socketPollConnect: {refused}", where="misc/socket.cc:578")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] is None and code == 1, d["summary"]
    # NCCL 2.3 in a container without rdma-core or a usable interface (nccl-tests#14): the
    # libibverbs WARN is NCCL's look for IB, which it then goes without; the failure is
    # the socket helper's, which names no transport either, but with no verbs library and
    # no plugin sockets were all that NCCL could try (fc0d612)
    probe = L.warn("b71c0f2e9a13", 4410, 0, "Failed to open libibverbs.so[.1]",
                   where="misc/ibvwrap.cu:61")
    sock = L.warn("b71c0f2e9a13", 4410, 0, "Socket creation failed : Address family not "
                  "supported by protocol", where="include/socket.h:311")
    code, d = check(tmp_path, probe + sock)
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]
    assert "libibverbs" not in d["ranks"][0]["failure"]
    # ... and alone, on every host of a working socket job that logged only WARNs, it is no
    # failure at all
    code, d = check(tmp_path, probe + L.warn("b71c0f2e9a14", 4411, 0, "Failed to open "
                                              "libibverbs.so[.1]", where="misc/ibvwrap.cu:61"))
    assert d["transport"] == "none" and code == 0, d["summary"]
    # the socket transport's own WARN (net_socket.cc) still names it: failing init, or a
    # request on a link that was up (its `socket progress error`, nccl#706)
    code, d = check(tmp_path, L.warn("gpu-r12", 9041, 6, "NET/Socket : unable to allocate "
                                     "requests", where="transport/net_socket.cc:302"))
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]
    code, d = check(tmp_path, L.warn("gpu-r12", 9041, 6, "NET/Socket : socket progress error",
                                     where="transport/net_socket.cc:414"))
    assert d["transport"] == "socket" and d["ranks"][0]["link_error"], d["summary"]


def test_a_plugins_socket_error_under_the_ucx_plugin_is_ib(tmp_path):
    # nccl#947's shape (UCX + SHARP plugin on InfiniBand): the plugin's own socket.c fails,
    # its chain runs through ucx_plugin.c (verbs through UCX) up to the proxy; then NCCL's
    # socket helper reports the peer gone (an echo, not the transport that was tried)
    h, pid = "gpu-b17", 41122
    lines = L.warn(h, pid, 4, "Net : Connection closed by remote peer 10.40.3.21<41872>",
                   where="socket.c:540")
    lines += [L.info(h, pid, 4, m, tid=pid + 87) for m in (
        "socket.c:548 -> 6", "socket.c:560 -> 6", "ucx_plugin.c:485 -> 6", "include/net.h:27 -> 6",
        "transport/net.cc:701 -> 6", "proxy.cc:1297 -> 6")]
    lines += L.warn(h, pid, 4, "[Service thread] Error encountered progressing operation=Connect, "
                    "res=6, closing connection", where="proxy.cc:1448")
    lines += L.warn(h, pid, 4, "socketProgressOpt: Call to recv from 10.40.7.9<52210> failed : "
                    "Connection reset by peer", where="misc/socket.cc:29")
    lines += [L.info(h, pid, 4, m, tid=pid + 79) for m in ("misc/socket.cc:46 -> 6",
                                                           "misc/socket.cc:746 -> 6")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    assert d["ranks"][0]["failure"].startswith("Net : Connection closed by remote peer")


def test_aws_ofi_nccl_nvls_version_probe_is_no_failure(tmp_path):
    # SageMaker, one instance, nn.DataParallel: the plugin's NVLS check warns and goes on
    # (a TRACE in later releases); the training succeeded
    lines = ["Let's use 4 GPUs!", "NCCL version 2.17.1+cuda11.8"] + L.warn(
        "algo-1", 52, 0, "NET/OFI Could not find ncclGetVersion symbol",
        where="configure_nvls_option:287")
    lines += ["Reporting training SUCCESS"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and code == 0, d["summary"]
    streams = job(L.ofi_efa_rank, nccl="2.17.1")  # beside a working OFI job's lines
    for r, s in enumerate(streams):
        s[1:1] = L.warn(L.rank_host(r), 40000 + 17 * r, r % 4, "NET/OFI Could not find "
                        "ncclGetVersion symbol", where="configure_nvls_option:287")
    code, d = check(tmp_path, L.interleave(streams, 5))
    assert (d["transport"], d["provider"], code) == ("ofi", "efa", 0), d["summary"]


def test_aws_ofi_nccl_giving_up_alone_is_a_fallback_not_a_failure(tmp_path):
    # aws-ofi-nccl#174's one SageMaker instance: the plugin finds no EFA and gives up; NCCL
    # goes on with its own transports, and nothing failed after that
    lines = L.warn("algo-1", 312, 0, "NET/OFI Only EFA provider is supported", where="ofi_init:1288")
    lines += L.warn("algo-1", 312, 0, "NET/OFI aws-ofi-nccl initialization failed",
                    where="ofi_init:1339")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and code == 0, d["summary"]
    # ... but when NCCL then has no network left, init failed while trying OFI
    lines += L.warn("algo-1", 312, 0, "Failed to initialize any NET plugin", where="init.cc:1600")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ofi" and code == 1, d["summary"]
    # ... and so does an error chain that reaches init after it
    lines[-2:] = [L.info("algo-1", 312, 0, m) for m in ("transport/net.cc:340 -> 2",
                                                         "init.cc:1012 -> 2")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed", d["summary"]


def test_the_proxys_complaints_at_teardown_are_no_failure(tmp_path):
    # DeepEP#41: "is it normal that these warnings appear after the test ran?" One process,
    # its communicators destroyed: the proxy's service thread loses its peers
    h, pid = "5e2d71ac90f3", 4174
    lines = L.warn(h, pid, 0, "[Service thread] Accept failed Resource temporarily unavailable",
                   where="proxy.cc:1458") + [L.info(h, pid, 0, "misc/socket.cc:826 -> 3")]
    lines += L.warn(h, pid, 0, "[Service thread] Could not receive type from localRank 0, res=3, "
                    "closed=0", where="proxy.cc:1497")
    lines += L.warn(h, pid, 0, "[Proxy Service 0] Failed to execute operation Close from rank 0, "
                    "retcode 3", where="proxy.cc:1521")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and code == 0, d["summary"]
    # a failed Setup is the proxy passing on an init failure: with its chain to init, failed
    lines[-1] = lines[-1].replace("operation Close", "operation Setup")
    lines += [L.info(h, pid, 0, m) for m in ("proxy.cc:1529 -> 3", "init.cc:1398 -> 3")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed", d["summary"]


def test_an_ofi_error_that_names_efa_gives_the_provider(tmp_path):
    # aws-ofi-nccl's error names its provider in its own words (an EKS note): the EFA device,
    # and addresses in fi_addr_efa:// form; no `Selected Provider` line in the paste
    h, pid = "trn-node-0-0", 311
    lines = [L.info(h, pid, 0, "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA",
                    tid=712)]
    lines += L.warn(h, pid, 0, "NET/OFI Request 0x7f456c224810 completed with error. RC: 103. "
                    "Error: 4126 (Unresponsive receiver (reachable by EFA device but handshake "
                    "failed) My EFA addr: fi_addr_efa://[fe80::a11:2eff:fe44:db5]:0:142160333 "
                    "My host id: i-0a1b2c3d4e5f60718 Peer EFA addr: fi_addr_efa://[fe80::b22:"
                    "14ff:fedd:d5b3]:0:825957744 Peer host id: N/A). Completed length: 0",
                    where="cm_req_handle_error_entry:46")
    lines += [L.info(h, pid, 0, "transport/net.cc:753 -> 6", tid=710),
              L.info(h, pid, 0, "group.cc:73 -> 6 [Async thread]", tid=712)]
    code, d = check(tmp_path, lines)
    # (the handshake of the first collective's connection failed, EFA's 4126: that
    # connection never came up, so OFI was chosen and its setup failed; see
    # test_efas_unresponsive_receiver_says_whether_the_connection_was_ever_up)
    assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "efa"), \
        d["summary"]
    assert "Unresponsive receiver" in d["ranks"][0]["failure"]


def test_unprefixed_plugin_lines_tell_a_failed_jobs_transport_and_provider(tmp_path):
    # nccl#1913's paste: the plugin's lines lost their prefix, the failed rank's chain kept it
    h, pid = "trn-worker-3", 40211
    lines = ["NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v11)",
             "NCCL INFO NET/OFI Selected Provider is efa",
             "NCCL INFO NET/OFI Using EFA multi-rail support",
             "NET/OFI Unexpected number of remote rails for dev 0. Expected 3 but got 2"]
    lines += [L.info(h, pid, 0, m) for m in ("include/socket.h:403 -> 2",
                                             "transport/net.cc:476 -> 2",
                                             "transport/net.cc:1202 -> 2 [Async thread]")]
    lines += ["Test NCCL failure all_reduce.cu:471 'internal error - please report this issue "
              "to the NCCL developers'"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "efa"), d["summary"]
    assert [r["host"] for r in d["ranks"]] == [h]  # (the unprefixed lines make no rank)


def test_a_prefix_whose_pid_was_redacted_or_left_out(tmp_path):
    # nccl#2013: pid and thread redacted into one field; horovod#98 (NCCL 2.1 as pasted):
    # a host and a device only. Read like `[5] ... NCCL WARN`, one process per host and device.
    lines = [
        "[2026-03-13 22:26:02] node-a7:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
        "failed with 110 Connection timed out, on dev mlx5_3:1, curr state INIT, next state RTR",
        "[2026-03-13 22:26:02] node-a7:XXXXXX [6] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
        "failed with 110 Connection timed out, on dev mlx5_4:1, curr state INIT, next state RTR",
        "gpusrv [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed",
        "Failed, NCCL error test_nccl.c:99 'unhandled system error'",
    ]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    assert [(r["host"], r["cuda_dev"]) for r in d["ranks"]] == [
        ("gpusrv", 0), ("node-a7", 5), ("node-a7", 6)]
    # a clock, or an application's WARN without a source file, makes no process
    for line in ("12:00:01 [0] main.c:12 WARN low disk space", "myapp [0] WARN cache is cold",
                 "myapp:XXXX [0] WARN cache is cold"):
        code, d = check(tmp_path, [line])
        assert d["ranks"] == [] and d["transport"] == "none", line


def test_a_paste_quoted_as_markdown(tmp_path):
    # nccl#442's shape: every line quoted with `> `, the rank table's `#` lost (a page made
    # it a heading); one rank on one desktop, and stripped lines under the quote are read
    lines = ["> nThread 1 nGpus 1 minBytes 134217728 maxBytes 134217728 step: 1048576(bytes)",
             "> ", "> Using devices",
             "> Rank  0 Pid  40211 on    WORKPC device  0 [0x21] TITAN RTX",
             "> WORKPC:40211:40211 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.77.19<0>",
             "> WORKPC:40211:40211 [0] NCCL INFO Using network Socket"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    quoted = ["> > " + x for x in L.strip_prefix(L.interleave(job(L.ib_rank), 7), keep_level=False)]
    code, d = check(tmp_path, quoted)
    assert d["transport"] == "ib", d["summary"]


@pytest.mark.parametrize("ring", ["Channel {c:02d}/32 :    0", "Ring {c:02d} :    0"])
def test_a_ring_of_one_rank_is_a_communicator_of_one(tmp_path, ring):
    # vissl#480's single-node run (world_size 1): NCCL 2.7.8 chose Socket and printed every
    # channel's ring, each of one rank; the paste holds no comm line. One rank, no network.
    h, pid = "gn07", 51320
    lines = [L.info(h, pid, 0, m) for m in (
        "Bootstrap : Using [0]mgmt0:10.44.8.31<0>", "NET/IB : No device found.",
        "NET/Socket : Using [0]mgmt0:10.44.8.31<0>", "Using network Socket")]
    lines += ["NCCL version 2.7.8+cuda10.2"]
    lines += [L.info(h, pid, 0, ring.format(c=c), tid=pid + 97) for c in range(4)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False and code == 0, d["summary"]
    lines[-4:] = [x.replace("    0", "    0   1") for x in lines[-4:]]  # two ranks: unknown
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["inter_node"] is None, d["summary"]


@pytest.mark.parametrize("note", ["               # <- the transport: TCP", "  (RoCE)",
                                  "\t\t\u2190 chosen", " # Ethernet", " (TCP)"])
def test_a_note_written_after_the_network_line(tmp_path, note):
    # a blog's annotated excerpt: the deciding line carries the writer's note after it
    lines = [L.info("trn-lead-0", 1, 0, "NET/IB : No device found.", tid=62),
             L.info("trn-lead-0", 1, 0, "Using network Socket" + note, tid=62),
             L.info("trn-lead-0", 1, 0, "comm 0x5611aa3c2020 rank 0 nRanks 2 nNodes 2 localRanks 1 "
                    "localRank 0 MNNVL 0", tid=62)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["nodes"] == 2, d["summary"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]


@pytest.mark.parametrize("prefix", ["[09:14:{s:02d}] [gpu-{h} rank {r}] ", "[pod/trainer-{h}-{r}/main] ",
                                    "Mar 03 12:00:{s:02d} gpu-{h} python[{r}]: "])
def test_stripped_lines_under_a_prefix_no_rule_knows(tmp_path, prefix):
    # a write-up's lines: NCCL's own prefix gone, the writer's (or kubectl's, journald's) in
    # its place; what is left of the prefix, clock times taken out, names the process
    lines = []
    for r, stream in enumerate(job(L.ib_rank, nodes=2, gpn=2)):
        pre = prefix.format(s=r, h="xy"[r // 2], r=r)
        lines += [pre + x for x in L.strip_prefix(stream)]
    code, d = check(tmp_path, L.interleave([lines], 0))
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]
    assert len(d["ranks"]) == 4, [r["label"] for r in d["ranks"]]
    # a splice that cut NCCL's own prefix (`0119:40126 [3] NCCL INFO ...`) makes no process
    code, d = check(tmp_path, ["0119:40126 [3] NCCL INFO Channel 01/0 : 3[3] -> 7[3] [receive] "
                               "via NET/AWS Libfabric/3/GDRDMA"])
    assert d["ranks"] == [], d["ranks"]


def test_uccl_rdma_plugin_is_ib(tmp_path):
    # uccl#172: UCCL's net plugin names itself RDMA_Plugin (verbs on IB/RoCE NICs)
    streams = job(L.plugin_rank, plugin="RDMA_Plugin (v8)", net_name="RDMA_Plugin")
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "ib" and d["nodes"] == 2, d["summary"]
    assert "unknown-network" not in [w["code"] for w in d["warnings"]], d["warnings"]


def test_doc_excerpts_with_elided_or_starred_values(tmp_path):
    # a README's elided socket line (`[0]ens5 ...`: RCCL fell back to TCP) and AWS's EFA
    # guide's sample line, which marks the provider with a trailing `*`
    code, d = check(tmp_path, ["NCCL INFO Failed to open libibverbs.so[.1]",
                               "NCCL INFO NET/Socket : Using [0]ens5 ... [1]roce0 ..."])
    assert d["transport"] == "socket" and d["ranks"][0]["socket_ifaces"] == ["ens5", "roce0"]
    # a DGX Spark pair's README, its interface and address put as placeholders: sockets
    # chosen after IB failed, on an interface the paste does not name
    code, d = check(tmp_path, ["NCCL INFO NET/IB : No device found.",
                               "NCCL INFO Failed to initialize NET plugin IB",
                               "NCCL INFO NET/Socket : Using [0]<lan-if>:<head-ip><0>"])
    assert d["transport"] == "socket" and d["ranks"][0]["socket_ifaces"] == [], d["summary"]
    code, d = check(tmp_path, [L.info("ip-10-20-3-77", 41, 0, "NET/OFI Forcing AWS OFI ndev 4"),
                               L.info("ip-10-20-3-77", 41, 0, "NET/OFI Selected Provider is efa*")])
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]
    # a lab's notes aligned with blanks, a note that joined two lines (Slingshot)
    for line in ("NET/OFI Selected provider is cxi   (found 2 nics)     <- the Slingshot NIC",
                 "NET/OFI Using aws-ofi-nccl 1.6.0-hcopy ... Selected Provider is cxi"):
        code, d = check(tmp_path, [line, "NCCL INFO Using network AWS Libfabric"])
        assert (d["transport"], d["provider"]) == ("ofi", "cxi"), (line, d["summary"])
    # a write-up's comm line with the pointer left out still says one node
    code, d = check(tmp_path, ["NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.4.7.21<0>",
                               "comm rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0",
                               "Channel 00/12 : 0 1 2 3"])
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]


def test_a_rank_that_died_of_a_fault_in_a_job_across_nodes(tmp_path):
    # pytorch#37325, horovod#893 (NCCL 2.4-2.5 on IB): one rank's init died of a CUDA fault
    # in shm setup, its chain through init; the paste cut that rank's own network lines.
    # The job failed, trying what the other ranks chose.
    streams = job(L.legacy_rank, nccl="2.4.8")
    h, pid = L.rank_host(2), 40000 + 17 * 2
    streams[2] = L.warn(h, pid, 2, "Cuda failure 'invalid argument'", where="include/shm.h:42") + [
        L.info(h, pid, 2, m) for m in ("transport/shm.cu:187 -> 1", "init.cu:658 -> 1",
                                       "init.cu:804 -> 1", "init.cu:915 -> 1")]
    code, d = check(tmp_path, L.interleave(streams, 9))
    assert d["transport"] == "failed" and d["attempted"] == "ib" and code == 1, d["summary"]
    # on one node the same fault is no network's (stop 22): none
    single = [L.info("dgx1", 7, 0, m) for m in ("Using network IB", "comm 0x55aa rank 0 nRanks 2 "
                                                 "nNodes 1 localRanks 2 localRank 0 MNNVL 0")]
    single += streams[2]
    code, d = check(tmp_path, single)
    assert d["transport"] == "none", d["summary"]


def test_lines_printed_before_a_device_is_looked_for_are_no_choice(tmp_path):
    # NCCL 2.3's sideband line comes before it looks for an HCA (horovod#685: then `0
    # devices` and Socket); HPC-X's `P2P plugin IBext` when the plugin loads (nccl#952)
    h = "wks7"
    socket_rank = [L.info(h, 5120, 0, m) for m in (
        "NET : Using interface eno1:172.20.3.14<0>", "NET/IB : Using interface eno1 for sideband "
        "communication", "Net/IB: call to devices() returned 0 devices.", "Using network Socket")]
    cut_rank = [L.info(h, 5121, 1, m) for m in (
        "NET : Using interface eno1:172.20.3.14<0>", "NET/IB : Using interface eno1 for sideband "
        "communication")]
    code, d = check(tmp_path, socket_rank + cut_rank)
    assert d["transport"] == "socket" and d["mixed"] is False, d["summary"]
    plugin_only = [L.info("gpu-c3", 5924, 5, m) for m in (
        "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so", "P2P plugin IBext")]
    code, d = check(tmp_path, plugin_only)
    assert d["transport"] == "none", d["summary"]
    # ... though it names the plugin, where no `Loaded net plugin` line does (NCCL 2.10's
    # HPC-X on an Azure node, a committed Megatron-DeepSpeed log)
    assert d["plugin"] == "IBext", d


def test_nccl_going_on_without_collnet_is_no_failure(tmp_path):
    # nccl#1050: SHARP could not create its job; NCCL says so and goes on point-to-point
    h = "vmx-41"
    lines = L.warn(h, 2047, 7, "NET/IB : SHARP coll init error: Cannot create SHARP job(-11)",
                   where="sharp_plugin.c:320")
    lines += [L.info(h, 2047, 7, m) for m in ("transport.cc:291 -> 2", "init.cc:670 -> 2")]
    lines += L.warn(h, 2047, 7, "Cannot initialize CollNet, using point-to-point network instead",
                    where="transport.cc:323")
    lines = [L.info(h, 2047, 7, "Using network IBext")] + lines + [
        L.info(h, 2047, 7, "Channel 00/0 : 7[7] -> 15[7] [send] via NET/IBext/0/GDRDMA")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and code == 0, d["summary"]
    # another rank that printed only the chain (its fallback line cut) did not fail either
    lines += [L.info("vmx-43", 843, 0, m) for m in ("transport.cc:291 -> 2", "init.cc:670 -> 2")]
    code, d = check(tmp_path, lines)
    assert "failed" not in {r["transport"] for r in d["ranks"]}, d["summary"]


def test_a_stray_connection_rejected_by_the_bootstrap_is_no_failure(tmp_path):
    # nccl#1808: an HTTP scrape hit NCCL's port ("GET /met" as the magic); NCCL closes it
    # and accepts again, and the channels went on over IBext
    h, pid = "gpu-n7", 4711
    lines = [L.info(h, pid, 0, "Using network IBext_v8")]
    lines += L.warn(h, pid, 0, "socketFinalizeAccept: wrong magic 2f74656d20544547 != "
                    "3f7c5a1b9e2d4c08", where="misc/socket.cc:447")
    lines += [L.info(h, pid, 0, "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext_v8/0/GDRDMA")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and code == 0, d["summary"]


def test_a_failed_socket_on_the_loopback_of_one_rank_is_no_network(tmp_path):
    # nccl-tests#217 (`-g 1` on `lo`): a localhost socket failed; one rank, no network
    h, pid = "ws01", 51377
    lines = [f"#  Rank  0 Group  0 Pid  {pid} on {h} device  0 [0x01] NVIDIA RTX A6000",
             L.info(h, pid, 0, "NET/Socket : Using [0]lo:127.0.0.1<0>", tid=pid + 10),
             L.info(h, pid, 0, "Using network Socket", tid=pid + 10)]
    lines += L.warn(h, pid, 0, "socketProgress: Connection closed by remote peer "
                    "localhost<41226>", where="misc/socket.cc:50")
    lines += [L.info(h, pid, 0, "misc/socket.cc:752 -> 6", tid=pid + 9)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and code == 0, d["summary"]


def test_one_nodes_file_of_pipeline_pairs_across_nodes(tmp_path):
    # a vLLM job (TP 8 in a node, PP 2 across), one node's file: each process is `rank 1
    # nranks 2` of its own pipeline pair, whose rank 0 is on the other node. Two rank 1s on
    # one host are two communicators: the host does not hold a whole one.
    h = "gpu-w2"
    lines = []
    for dev, (pid, comm) in enumerate(((4411, "0x2a7c1150"), (4412, "0x2c9f0a40"))):
        lines += [L.info(h, pid, dev, m) for m in (
            "Using network IB",
            f"ncclCommInitRank comm {comm} rank 1 nranks 2 cudaDev {dev} nvmlDev {dev} busId "
            f"{dev + 1}00000 commId 0x51e0a9c4d2b7e61{dev} - Init START",
            f"Channel 00/0 : 0[{dev}] -> 1[{dev}] [receive] via NET/IB/{dev}/GDRDMA",
            f"Channel 00/0 : 1[{dev}] -> 0[{dev}] [send] via NET/IB/{dev}/GDRDMA")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["inter_node"] is True and code == 0, d["summary"]
    # ... while ranks 0 and 1 of one communicator on one host, P2P and SHM disabled, stay one
    lines = [x.replace("rank 1 nranks 2 cudaDev 1", "rank 0 nranks 2 cudaDev 1") for x in lines]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]


def test_init_timings_tell_that_init_was_done(tmp_path):
    # NCCL >= 2.27 prints `Init timings - ncclCommInitRank: ...` once init is done; a paste
    # without the Init COMPLETE line (an SGLang write-up) then shows a collective and the
    # link breaking: it ran on IB, then the link broke
    h, pid = "gpn-b7", 385303
    lines = [L.info(h, pid, 1, m) for m in (
        "Using network IB",
        "Init timings - ncclCommInitRank: rank 1 nranks 16 total 1.57 (kernels 0.25, alloc 0.98)",
        "AllReduce: opCount 0 sendbuff 0x7f67 recvbuff 0x7f67 count 1 datatype 7 op 0 root 0 comm "
        "0x563d [nranks=16] stream 0x563e")]
    lines += L.warn(h, pid, 1, "NET/IB: Got completion from peer 10.77.91.63<51161> with status=4 "
                    "opcode=32614 len=32614 vendor err 81 (Send)", where="transport/net_ib.cc:2453")
    lines += [L.info(h, pid, 1, "transport/net.cc:1227 -> 6", tid=pid + 1448)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and "status=4" in d["ranks"][0]["link_error"], d["summary"]
    # without the Init timings line the same (nccl-tests#252, NCCL 2.27, no init lines)
    code, d = check(tmp_path, lines[:1] + lines[2:])
    assert d["transport"] == "ib" and d["ranks"][0]["link_error"], d["summary"]


def test_numbered_host_names_are_hosts(tmp_path):
    # horovod#492: NCCL 2.2 on node01, node05, node06, node07 (a number tells machines
    # apart; only a name with none, `node` or `hostname`, is taken as redacted)
    streams = job(L.legacy_rank, nodes=4, gpn=1, nccl="2.2.13", host_fmt="node{:02d}")
    code, d = check(tmp_path, L.interleave(streams, 6))
    assert d["transport"] == "ib" and d["nodes"] == 4, d["summary"]
    # nccl-tests' rank table lists one numbered host for all 8 ranks: one node
    lines = [f"#  Rank {r} Group  0 Pid  20231 on     node07 device  {r} [0x{r:02x}] NVIDIA H100"
             for r in range(8)]
    lines += [L.info("node07", 20231, r, m) for r in range(8) for m in (
        "NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB bond0:10.3.3.7<0>", "Using network IB")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["nodes"] == 1, d["summary"]


def test_a_bootstrap_error_before_the_choice_fails_the_rank(tmp_path):
    # NVIDIA/nccl#1176 (NCCL 2.19.3, srun -l): one rank's bootstrap reads a short message
    # before it names a network; its WARN names no transport; the others chose OFI
    streams = job(L.ofi_efa_rank, nccl="2.19.3")
    h, pid = L.rank_host(4), 40000 + 17 * 4
    streams[4] = streams[4][:2] + L.warn(
        h, pid, 0, "Message truncated : received 256 bytes instead of 4",
        where="bootstrap.cc:77") + [L.info(h, pid, 0, m, tid=pid + 3) for m in (
            "bootstrap.cc:554 -> 3", "transport.cc:204 -> 3", "group.cc:64 -> 3 [Async thread]")]
    code, d = check(tmp_path, L.interleave(streams, 4))
    assert d["transport"] == "failed" and d["attempted"] == "ofi" and code != 0, d["summary"]
    failed = [r for r in d["ranks"] if r["transport"] == "failed"]
    assert [r["host"] for r in failed] == [h] and failed[0]["failure"].startswith("Message trunc")


@pytest.mark.parametrize("thread", ["Progress Thread", "Proxy Thread"])
def test_a_link_that_breaks_at_the_first_collective_is_a_link_error(tmp_path, thread):
    # nccl-tests#252 (HPC-X's IB plugin): every rank completed init, then the first
    # collective's send completed with error 4 and the proxy's progress thread returned it
    # (`[Proxy Thread]` before NCCL 2.19): the job ran on IB, then that link broke
    streams = job(L.ib_rank, nccl="2.18.5")
    h, pid = L.rank_host(4), 40000 + 17 * 4
    streams[4] += L.warn(h, pid, 0, "NET/IB : Got completion from peer 10.3.35.1<49189> with "
                         "error 4, opcode 5327, len 5327, vendor err 81 (Send)",
                         where="ib_plugin.c:1105")
    streams[4] += [L.info(h, pid, 0, m, tid=pid + 9) for m in (
        "transport/net.cc:1137 -> 6", "proxy.cc:698 -> 6", f"proxy.cc:878 -> 6 [{thread}]")]
    code, d = check(tmp_path, L.interleave(streams, 8))
    assert d["transport"] == "ib" and code == 0, d["summary"]
    [bad] = [r for r in d["ranks"] if r["link_error"]]
    assert bad["host"] == h and bad["transport"] == "ib" and "error 4" in bad["link_error"]
    assert "link-failed" in [w["code"] for w in d["warnings"]]
    # the same WARN with no chain (a cut paste) the same
    streams[4] = streams[4][:-3]
    code, d = check(tmp_path, L.interleave(streams, 8))
    assert d["transport"] == "ib" and sum(bool(r["link_error"]) for r in d["ranks"]) == 1
    assert not any(r["failed_after_init"] for r in d["ranks"])


@pytest.mark.parametrize("comm_before", [False, True])
def test_an_aborted_communicators_line_says_nothing_of_init(tmp_path, comm_before):
    # A committed 2-node job (round 36, NCCL 2.20.5): rank 0's host died; on gpu-node2 the
    # socket transport's receive failed, passed up to `[Progress Thread]`, and the
    # communicator was aborted, `comm ... rank 1 nranks 2 ... - Abort COMPLETE`. That line
    # comes after the error: no sign that init was under way, so the link that broke was up.
    # A communicator line before the error, with no Init COMPLETE, is init under way.
    h, pid = "gpu-node2", 2985003
    err = L.warn(h, pid, 0, "socketProgress: Connection closed by remote peer gpu-node1.int<45074>",
                 where="misc/socket.cc:50")
    err += [L.info(h, pid, 0, m, tid=pid + 21) for m in (
        "misc/socket.cc:752 -> 6", "transport/net_socket.cc:474 -> 6",
        "transport/net.cc:1298 -> 6", "proxy.cc:694 -> 6", "proxy.cc:874 -> 6 [Progress Thread]")]
    comm = "comm 0x8e01d00 rank 1 nranks 2 cudaDev 0 busId 100000"
    lines = [L.info(h, pid, 0, "Using network Socket")]
    if comm_before:
        lines.append(L.info(h, pid, 0, f"ncclCommInitRank {comm} - Init START"))
    lines += err + [L.info(h, pid, 0, f"{comm} - Abort COMPLETE", tid=pid + 13)]
    code, d = check(tmp_path, lines)
    if comm_before:
        assert (d["transport"], d["attempted"]) == ("failed", "socket"), d["summary"]
    else:
        assert d["transport"] == "socket" and code == 0, d["summary"]
        assert "Connection closed" in d["ranks"][0]["link_error"]


@pytest.mark.parametrize("old_proxy", [False, True])
def test_a_request_that_failed_while_its_connection_was_set_up_fails_the_job(tmp_path,
                                                                           old_proxy):
    # An EKS pod (NCCL 2.27.3, aws-ofi-nccl on EFA), DeepSpeed's first broadcast: channels
    # over NET/Libfabric, then the plugin's connection manager's request `completed with
    # error ... Unresponsive receiver (reachable by EFA device but handshake failed)`, passed
    # up through transport.cc (ncclTransportP2pSetup) and generic.cc: the connection was
    # never up, so OFI was chosen and failed, as a socket connection that fails at the first
    # collective does (nccl#2057). NCCL <= 2.11 ran its proxy thread in transport.cc: there
    # `transport.cc:163 -> 2 [Proxy Thread]` passes up a running link's error (nccl-tests#24).
    h, pid = "llama-3-8b-node-0-0", 194
    lines = [L.info(h, pid, 0, f"Channel 0{c}/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA",
                    tid=712) for c in (0, 1)]
    if old_proxy:  # (nccl-tests#24's words, on IB)
        lines = [x.replace("NET/Libfabric", "NET/IB") for x in lines]
        lines += L.warn(h, pid, 0, "NET/IB : Got completion with error 4, opcode 1, len 0, "
                        "vendor err 81", where="transport/net_ib.cu:788")
        chain = ["include/net.h:34 -> 2", "transport/net.cu:478 -> 2",
                 "transport.cu:163 -> 2 [Proxy Thread]"]
    else:  # (a completion error in words that do not say it was a handshake's: EFA's own
        # 4126 does, see the test below)
        lines += L.warn(h, pid, 0, "NET/OFI Request 0x7f456c222f60 completed with error. RC: "
                        "5. Error: 5 (Input/output error) My EFA addr: fi_addr_efa://[fe80::c55:"
                        "2eff:fe44:db5]:0:1). Completed length: 0",
                        where="cm_req_handle_error_entry:46")
        chain = ["transport/net.cc:753 -> 6", "transport.cc:198 -> 6",
                 "transport/generic.cc:19 -> 6", "group.cc:146 -> 6",
                 "group.cc:73 -> 6 [Async thread]"]
    code, d = check(tmp_path, lines + [L.info(h, pid, 0, m, tid=712) for m in chain])
    if old_proxy:
        assert d["transport"] == "ib" and d["ranks"][0]["link_error"], d["summary"]
    else:
        assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "efa"), \
            d["summary"]
        assert d["ranks"][0]["link_error"] is None and code == 1


@pytest.mark.parametrize("code,text,up", [
    (4126, " (Unresponsive receiver (reachable by EFA device but handshake failed))", False),
    (4126, "", False),  # a runbook's paste that kept the code only
    (4124, " (Unresponsive receiver (connection previously established))", True)])
def test_efas_unresponsive_receiver_says_whether_the_connection_was_ever_up(tmp_path, code,
                                                                             text, up):
    # libfabric's efa_errno.h: 4126, FI_EFA_ERR_UNESTABLISHED_RECV_UNRESP, "handshake
    # failed" (a g5 runbook's security group without the outbound rule, dying at the first
    # barrier): the connection never came up, OFI's setup failed. 4124 ("connection previously
    # established"): a running link's peer went away.
    msg = f"NET/OFI Request 0x7f456c222f60 completed with error. RC: 103. Error: {code}{text}"
    code_, d = check(tmp_path, L.warn("ip-10-0-1-7", 2210, 0, msg,
                                      where="cm_req_handle_error_entry:46"))
    if up:
        assert d["transport"] == "ofi" and d["ranks"][0]["link_error"], d["summary"]
    else:
        assert (d["transport"], d["attempted"]) == ("failed", "ofi"), d["summary"]
        assert d["ranks"][0]["link_error"] is None


def test_a_socket_error_whose_chain_a_paste_cut_is_the_progress_threads_like_the_last(tmp_path):
    # LlamaFactory#6849: a pod's recv on a link of the socket transport failed, mid-run; the
    # paste holds its chains through net_socket.cc to `[Progress Thread]`, and ends with one
    # more WARN whose chain was cut before that line: the same running link's error
    h, pid = "pt-gbcg65vy-worker-0", 4288

    def broke(last: bool) -> list[str]:
        chain = ["misc/socket.cc:47 -> 6", "misc/socket.cc:752 -> 6",
                 "transport/net_socket.cc:474 -> 6", "transport/net.cc:1137 -> 6",
                 "proxy.cc:698 -> 6", "proxy.cc:878 -> 6 [Progress Thread]"]
        return L.warn(h, pid, 1, "socketProgressOpt: Call to recv from 10.119.24.53<49901> "
                      "failed : Broken pipe", where="misc/socket.cc:30") + [
            L.info(h, pid, 1, m, tid=pid + 233) for m in (chain if last else chain[:-1])]

    code, d = check(tmp_path, broke(True) + broke(False))
    assert d["transport"] == "socket" and d["verdict"] != "failed", d["summary"]
    assert "Broken pipe" in d["ranks"][0]["link_error"]
    # with no progress-thread line at all, nothing says a link was up: a failed init
    code, d = check(tmp_path, broke(False))
    assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]


@pytest.mark.parametrize("peer", ["peer 192.168.161.30<59210> ", ""])
def test_the_socket_transports_truncated_message_is_a_running_link_s_error(tmp_path, peer):
    # nccl#626 (NCCL 2.10: `peer ...`; 2.6 names none): net_socket.cc's receive on a data
    # connection got more than was posted, in a running job: the job ran on sockets
    code, d = check(tmp_path, L.warn("dell-T640", 8841, 0, f"NET/Socket : {peer}message "
                                     "truncated : receiving 1048576 bytes instead of 65536",
                                     where="transport/net_socket.cc:424"))
    assert d["transport"] == "socket" and "truncated" in d["ranks"][0]["link_error"]
    # ... unlike the bootstrap's (nccl#1176), during init
    lines = L.warn("dell-T640", 8841, 0, "Message truncated : received 256 bytes instead of 4",
                   where="misc/socket.cc:790")
    lines += [L.info("dell-T640", 8841, 0, m) for m in ("bootstrap.cc:81 -> 3",
                                                         "init.cc:1398 -> 3")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["ranks"][0]["link_error"] is None, d["summary"]


@pytest.mark.parametrize("cut", [False, True])
def test_the_socket_transports_progress_error_is_a_running_link_s_error(tmp_path, cut):
    # nccl#706 (NCCL 2.12.12, 32 Kubernetes pods, hung "after multiple training steps"): the
    # socket helper's recv timed out, then net_socket.cc's test of a request, which runs only
    # on a connection that is up, failed, passed up to `[Proxy Thread]`: the job ran on
    # sockets. The paste glued horovodrun's `[15]` to a prefix cut to `23:83:2526` on the
    # second WARN (`cut`): the same process's error still.
    h, pid = "worker-23", 83
    second = L.warn(h, pid, 0, "NET/Socket : socket progress error",
                    where="transport/net_socket.cc:219")
    if cut:
        second[1] = second[1].replace(f"{h}:", "23:", 1)
    lines = [*L.warn(h, pid, 0, "Net : Call to recv from 100.96.188.199<41468> failed : "
                     "Connection timed out", where="misc/socket.cc:503"),
             L.info(h, pid, 0, "misc/socket.cc:520 -> 2"), *second,
             *[L.info(h, pid, 0, m) for m in ("include/net.h:32 -> 2", "transport/net.cc:870 -> 2",
                                               "proxy.cc:494 -> 2", "proxy.cc:614 -> 2 [Proxy Thread]")]]
    code, d = check(tmp_path, ["[15]" + x if x else x for x in lines])
    assert d["transport"] == "socket" and len(d["ranks"]) == 1, d["summary"]
    assert "socket progress error" in d["ranks"][0]["link_error"]
    assert "link-failed" in [w["code"] for w in d["warnings"]]


def test_sockets_after_an_hca_that_could_not_be_opened_are_an_ib_fallback(tmp_path):
    # nccl#451: DeepSpeed in Docker on a RoCE host, no /dev/infiniband in the container: IB
    # found mlx5_bond_0, could not open it, then no device; the job ran "extremely slow" on
    # sockets. No --fabric given: the HCA says which fabric sockets stood in for.
    h, pid = "9d1c0e7f2a41", 133
    lines = L.warn(h, pid, 0, "Call to ibv_open_device failed", where="misc/ibvwrap.cc:212")
    lines += L.warn(h, pid, 0, "NET/IB : Unable to open device mlx5_bond_0",
                    where="transport/net_ib.cc:148")
    lines += [L.info(h, pid, 0, m) for m in (
        "NET/IB : No device found.", "NET/Socket : Using [0]bond0:10.20.1.5<0>",
        "Using network Socket")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["fabric"] == "infiniband" and code == 1
    assert "mlx5_bond_0" in d["fabric_inferred_from"]
    assert "socket-fallback" in [w["code"] for w in d["warnings"]]
    # with no HCA named, no fabric is inferred: sockets may be all the job had
    code, d = check(tmp_path, lines[4:])
    assert d["transport"] == "socket" and d["fabric"] is None and code == 0, d["summary"]


@pytest.mark.parametrize("qp", [
    "NET/IB: IbDev 4 Port 1 qpn 103534 set_ece={supported=1, vendor_id=0x15b3, options=0x0, "
    "comp_mask=0x0}",
    "NET/IB: NCCL Dev 3 IbDev 3 Port 1 qpn 1033 mtu 5 LID 0 subnet-prefix 65152 FLID 0 "
    "fifoRkey=0x1c8f00 fifoLkey=0x1c8f00"])
def test_a_queue_pair_of_the_ib_transport_is_its_choice(tmp_path, qp):
    # nccl#1669: a 3-host all-to-all on NCCL 2.26.2 whose paste kept a rank's QP lines, then
    # RAS's crash: IB was chosen, though no `Using network` line is left
    lines = [L.info("rtptest1621", 405884, 0, "NCCL_IB_FIFO_TC set by environment to 224.")]
    lines += [L.info("rtptest1625", 1886888, 7, qp, tid=1890510)] * 4
    lines += [L.info(h, pid, 0, "RAS client listening socket at ::1<28028>")
              for h, pid in (("rtptest1620", 935572), ("rtptest1621", 405884))]
    code, d = check(tmp_path, lines + ["[rtptest1621:405884] *** Process received signal ***"])
    assert d["transport"] == "ib", d["summary"]
    # a later choice still wins
    code, d = check(tmp_path, lines + [L.info("rtptest1625", 1886888, 7, "Using network Socket")])
    assert d["transport"] == "socket", d["summary"]


def test_a_backtick_before_the_prefix_is_no_part_of_the_host(tmp_path):
    # NVIDIA/nccl#928: "error log `G8-2:19989:20082 [1] ... NCCL WARN ..." (markdown)
    streams = job(L.ib_rank, nccl="2.18.3", host_fmt="G8-{:d}")
    lines = L.interleave(streams, 2) + ["error log `" + L.warn(
        "G8-1002", 19989, 1, "NET/IB : Got completion from peer 10.9.0.3<53249> with error 4, "
        "opcode 32564, len 32564, vendor err 81 (Send)", where="transport/net_ib.cc:1295")[1]]
    code, d = check(tmp_path, lines)
    assert sorted({r["host"] for r in d["ranks"]}) == ["G8-1000", "G8-1001", "G8-1002"]
    assert d["nodes"] == 3


def test_the_closing_backtick_of_a_quoted_line_is_no_part_of_its_message(tmp_path):
    # Russian KubeRay notes (round 36): `` - `misc/ibvwrap.cc:203 NCCL WARN Call to
    # ibv_create_cq failed with error Cannot allocate memory` ``, the host cut by the author
    warn = "Call to ibv_create_cq failed with error Cannot allocate memory"
    code, d = check(tmp_path, [f"- `misc/ibvwrap.cc:203 NCCL WARN {warn}`",
                               "- `RuntimeError: NCCL error: unhandled system error`"])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]
    assert d["ranks"][0]["failure"] == warn and d["ranks"][0]["nccl_warnings"] == [warn]
    # ... or in double quotes, its prefix and all (a LUMI course's Q&A): no `"` in the host
    warn = "NET/OFI Couldn't open a fabric access domain. RC: -38, ERROR: Function not implemented"
    code, d = check(tmp_path, [f'    "nid005018:47819:47913 [0] create_nccl_ofi_component:817 '
                               f'NCCL WARN {warn}" '])
    assert (d["transport"], d["attempted"]) == ("failed", "ofi"), d["summary"]
    assert (d["ranks"][0]["host"], d["ranks"][0]["failure"]) == ("nid005018", warn)


@pytest.mark.parametrize("mark", ["*", "**"])
def test_markdown_emphasis_around_a_line_is_no_part_of_the_host(tmp_path, mark):
    # an AWS EFA tutorial's copy: `   *ip-192-168-2-54:14:14 [0] NCCL INFO NET/OFI Selected
    # Provider is efa*` beside the same process's plain line: one process, not two
    h = "ip-192-168-2-54"
    code, d = check(tmp_path, ["   $ " + L.info(h, 14, 0, "NET/OFI Forcing AWS OFI ndev 4"),
                               f"   {mark}" + L.info(h, 14, 0, "NET/OFI Selected Provider is "
                                                    f"efa{mark}")])
    assert [(r["host"], r["pid"]) for r in d["ranks"]] == [(h, 14)], d["summary"]
    assert d["provider"] == "efa" and not d["warnings"], d["summary"]


def test_a_loaded_plugins_line_with_an_authors_note_still_names_it(tmp_path):
    # an A3 Ultra write-up (round 31): gIB loaded, no libibverbs in the image, every NET
    # plugin failed; the author's `<-` notes follow the lines
    h, pid = "a3u-0", 81
    lines = [L.info(h, pid, 0, "NET/Plugin: Loaded net plugin gIB (v11)   <- the plugin "
                    "loads fine"),
             L.info(h, pid, 0, "Failed to open libibverbs.so[.1]")]
    lines += L.warn(h, pid, 0, "Failed to initialize any NET plugin   <- the failure",
                    where="plugin/net.cc:379")
    code, d = check(tmp_path, lines)
    assert d["plugin"] == "gIB" and d["plugin_api"] == "v11", d["summary"]
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


def test_any_net_plugin_failing_after_the_ofi_plugin_loaded_attempted_ofi(tmp_path):
    # aws-ofi-nccl 1.21 on cxi finds no eligible provider; NCCL then gives up on every net
    # plugin. NCCL_NET was set in the job script but not echoed.
    h, pid = "x3002c0s13b0n0", 2233526
    lines = [L.info(h, pid, 0, m) for m in (
        "NET/Plugin: Loaded net plugin AWS Libfabric (v11)",
        "NET/OFI Initializing aws-ofi-nccl 1.21.1", "NET/OFI No eligible providers were found")]
    lines += L.warn(h, pid, 0, "NET/OFI Initializing plugin failed",
                    where="ncclResult_t nccl_net_ofi_init(ncclDebugLogger_t):79")
    lines += L.warn(h, pid, 0, "Failed to initialize any NET plugin", where="plugin/net.cc:306")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ofi", d["summary"]
    # the INFO lines stripped of their prefix (only the WARNs keep it): the WARN names OFI
    stripped = ["NCCL INFO " + x.split(" NCCL INFO ", 1)[1] if " NCCL INFO " in x else x
                for x in lines]
    code, d = check(tmp_path, stripped)
    assert d["transport"] == "failed" and d["attempted"] == "ofi", d["summary"]


def test_stripped_warn_after_a_function_name(tmp_path):
    # aws-ofi-nccl writes `function:line` where NCCL writes `file.cc:line` (aws-ofi-nccl#927,
    # prefixes stripped by the reporter)
    lines = ["get_req_from_imm_data:1411 NCCL WARN NET/OFI Unexpected status (0) for message 246",
             "NCCL INFO transport/net.cc:1302 -> 3"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ofi", d["summary"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_topology_failure_on_one_node_is_not_a_network_failure(tmp_path, nodes):
    # ROCm/rccl#1728: one process drives 4 GPUs of one VM; the topology search fails after
    # NET/Socket lists its device. On one node the network was never to be used; on two,
    # init failed with the network chosen, as before.
    lines = []
    for n in range(nodes):
        h, pid = f"node-{n + 3}", 177402 + n
        lines += [L.info(h, pid, 0, "NET/Socket : Using [0]eth0:100.64.31.%d<0>" % (9 + n),
                         tid=pid + 11)]
        lines += L.warn(h, pid, 0, "Failed to find reverse path from remNode 0/200000 nlinks 3 "
                        "to node 0/700000", where="graph/paths.cc:82")
        lines += [L.info(h, pid, 0, m, tid=pid + 11) for m in (
            "graph/paths.cc:608 -> 3", "init.cc:1248 -> 3", "group.cc:68 -> 3 [Async thread]")]
        if nodes == 1:
            lines = ["# Using devices"] + [
                f"#  Rank {r} Group  0 Pid {pid} on {h} device {r} [0x00] AMD Instinct MI300X VF"
                for r in range(4)] + lines
    code, d = check(tmp_path, lines)
    if nodes == 1:
        assert d["transport"] == "none" and code == 0, d["summary"]
    else:
        assert d["transport"] == "failed" and d["attempted"] == "socket", d["summary"]


def test_source_files_that_a_rendered_page_made_links(tmp_path):
    # NVIDIA/nccl#2397 as its page renders: `.cc` is a domain, so `p2p.cc:648` became a link
    def linked(line):
        return re.sub(r"(\w+\.cc):(\d+)", r"[\1:\2](https://\1:\2/)", line)

    streams = job(L.ib_rank, nccl="2.21.5", channels=False)
    for r in (1, 5):
        h, pid = L.rank_host(r), 40000 + 17 * r
        streams[r] += [linked(x) for x in L.warn(
            h, pid, r % 4, "Call to ibv_modify_qp failed with error No such device",
            where="misc/ibvwrap.cc:262")]
        streams[r] += [linked(L.info(h, pid, r % 4, m)) for m in (
            "transport/net_ib.cc:800 -> 2", "init.cc:1234 -> 2")]
    lines = L.interleave(streams, 2)
    assert any("](https://init.cc:1234/)" in x for x in lines)
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    assert sorted(r["rank"] for r in d["ranks"] if r["transport"] == "failed") == [1, 5]
    assert [r for r in d["ranks"] if r["failure"]][0]["failure"].startswith("Call to ibv_modify_qp")


def test_a_rank_cut_after_no_ib_device_is_no_failure_where_others_chose(tmp_path):
    # NVIDIA/nccl#226 (NCCL 2.4.7): the paste begins mid-log, so one rank's only line is
    # `NET/IB : No device found.`; every other rank uses sockets. Alone, a rank with only
    # that line was cut there too: no failure (a WARN after it would be one)
    streams = job(L.legacy_rank, nccl="2.4.8", net="Socket", nodes=2, gpn=2, iface="eth0")
    streams[3] = [L.info(L.rank_host(3, 2), 40000 + 17 * 3, 1, "NET/IB : No device found.")]
    code, d = check(tmp_path, L.interleave(streams, 1))
    assert d["transport"] == "socket" and code == 0, d["summary"]
    assert [r["transport"] for r in d["ranks"]][-1] == "none"
    code, d = check(tmp_path, streams[3])
    assert d["transport"] == "none" and code == 0, d["summary"]


def test_a_warn_whose_message_was_wrapped_onto_indented_lines(tmp_path):
    # A site's debugging notes (aws-ofi-nccl 1.8 on cxi): the WARN line ends at `NCCL WARN`
    # and its message follows on indented lines, in blocks as line by line.
    h, pid = "nid005123", 418822
    head = [L.info(h, pid, 0, m) for m in (
        "NET/OFI Initializing aws-ofi-nccl 1.8.1-aws",
        "NET/OFI Selected Provider is cxi (found 4 nics)", "Using network AWS Libfabric")]

    def warn(*msg):
        return [f"[2026-05-13 18:01:41] {h}:{pid}:{pid + 685} [0] ofi_process_cq:196 NCCL WARN",
                *[f"    {m}" for m in msg], "",
                "libfabric:331207::cxi:av:cxip_av_insert_addr():114<warn>"]

    setup = warn("NET/OFI Couldn't open AV.", "RC: -22, ERROR: Invalid argument")
    joined = [f"{setup[0]} NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument"] + setup[3:]
    failures = []
    for lines in (head + setup, head + joined):
        code, d = check(tmp_path, lines)
        v = analyse(lines).to_dict()
        assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "cxi"), \
            d["summary"]
        assert v["summary"] == d["summary"] and v["ranks"][0]["failure"] == d["ranks"][0]["failure"]
        failures.append(d["ranks"][0]["failure"])
    assert failures == ["NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument"] * 2
    # a request that completed with an error: while init was under way (its communicator
    # line shows, no Init COMPLETE) it failed the rank; after Init COMPLETE (a debugging
    # note's cxi job, VNI not found: every SEND completed with error, the job hung) the job
    # ran on OFI and that link broke; so where no init line shows at all
    wrapped = warn("NET/OFI Request 0x400aa7dd3b98 completed with error.",
                   "RC: 107. Error: Inappropriate ioctl for device.")
    start = [L.info(h, pid, 0, "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init START")]
    code, d = check(tmp_path, head + start + wrapped)
    assert (d["transport"], d["attempted"]) == ("failed", "ofi"), d["summary"]
    assert d["ranks"][0]["nccl_warnings"] == [
        "NET/OFI Request 0x400aa7dd3b98 completed with error. RC: 107. Error: Inappropriate "
        "ioctl for device."]
    done = [L.info(h, pid, 0, "ncclCommInitRank \u2026 rank 0 nranks 2 \u2026 Init COMPLETE")]
    for lines in (head + done + wrapped, head + wrapped):
        code, d = check(tmp_path, lines)
        assert (d["transport"], d["provider"]) == ("ofi", "cxi"), d["summary"]
        assert d["ranks"][0]["link_error"].startswith("NET/OFI Request 0x400aa7dd3b98")


def test_a_paste_stripped_of_prefix_and_level_keeps_the_plugins_errors(tmp_path):
    # Perlmutter notes: every `host:pid:tid [n] NCCL INFO/WARN` was removed. The plugin's
    # error wording (which no INFO line has) is a WARN; under a launcher prefix it is
    # PyTorch's echo of the last error, which tells nothing new.
    lines = ["NET/OFI Initializing aws-ofi-nccl 1.19.0",
             "NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)",
             "NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "cxi"), \
        d["summary"]
    code, d = check(tmp_path, ["[rank3]: " + x for x in lines])
    assert d["transport"] == "ofi", d["summary"]
    # ... but a job script's comment or a markdown quote is no launcher (an Alps reproducer's
    # notes: `#   cxil_map: write error`, `#   NET/OFI Unable to register memory ...`)
    for mark in ("#   ", "> "):
        code, d = check(tmp_path, [mark + "cxil_map: write error", mark + "NET/OFI Unable to "
                                   "register memory (type = 1) for device 0. RC: -13, Error: "
                                   "Permission denied"])
        assert (d["transport"], d["attempted"]) == ("failed", "ofi"), (mark, d["summary"])


# --------------------------------------------------------------------------------------------
# Not failures


def test_probing_noise_is_not_a_failure(tmp_path):
    streams = job(L.legacy_rank, nccl="2.4.8", net="AWS Libfabric", provider="efa")
    for r, s in enumerate(streams):
        h, pid = L.rank_host(r), 40000 + 17 * r
        s[3:3] = [L.info(h, pid, r % 4, "NET/OFI No NIC info for dev 0"),
                  L.info(h, pid, r % 4, "include/net.h:24 -> 2"),
                  L.info(h, pid, r % 4, "NET/OFI No eligible providers were found; using "
                                        "SENDRECV protocol"),
                  L.info(h, pid, r % 4, "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' "
                                        "(distance 7 > 6)")]
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "ofi" and d["provider"] == "efa" and code == 0
    assert all(r["failure"] is None for r in d["ranks"])


def test_probe_chain_as_last_line_is_not_a_failure(tmp_path):
    streams = job(L.ofi_efa_rank, nccl="2.23.4")
    for r, s in enumerate(streams):
        s.append(L.info(L.rank_host(r), 40000 + 17 * r, r % 4, "include/net.h:24 -> 2"))
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "ofi" and code == 0


# --------------------------------------------------------------------------------------------
# One host is not a network


@pytest.mark.parametrize("one_process", [True, False])
@pytest.mark.parametrize("plugin,iface", [(True, "hsn0"), (False, "lo"), (False, "eth0")])
def test_single_host_printing_network_lines_is_none(tmp_path, one_process, plugin, iface):
    streams = L.single_host_job(one_process=one_process, plugin=plugin, iface=iface)
    code, d = check(tmp_path, L.interleave(streams, 4), "--fabric", "slingshot")
    assert d["transport"] == "none" and d["verdict"] == "single-node" and code == 0, d["summary"]
    assert d["selected"] == ("ofi" if plugin else "socket") and d["inter_node"] is False
    assert {r["transport"] for r in d["ranks"]} == {"none"}
    assert "socket-fallback" not in [w["code"] for w in d["warnings"]]
    assert "ranks-missing" not in [w["code"] for w in d["warnings"]]
    assert d["summary"].startswith("fabrikit: single node: NCCL network not used")


@pytest.mark.parametrize("nccl", ["2.12.12", "2.7.8", "2.5.6"])
def test_a_ring_order_line_tells_the_communicators_size(tmp_path, nccl):
    # rwth-i6/returnn#1469: two ranks on one host with NCCL_IB_DISABLE=1; the paste ends
    # before the comm lines, but each ring's order line lists every rank of it
    v = L._vt(nccl)[:2]
    head = "Channel {c:02d}/02 :" if v >= (2, 12) else ("Channel {c:02d} :" if v >= (2, 7)
                                                        else "Ring {c:02d} :")
    lines = [L.info("ncg12", 62563, 1, m, tid=62598) for m in (
        "NET/Socket : Using [0]ib0:192.168.8.11<0>", "Using network Socket")]
    lines += [L.info("ncg12", 62562, 0, head.format(c=c) + "    0   1", tid=62597)
              for c in range(2)]
    lines += [L.info("ncg12", 62562 + r, r, f"{head.format(c=c)} {r}[{r + 61}000] -> "
                     f"{1 - r}[{62 - r}000] via SHM/direct/direct", tid=62597 + r)
              for c in range(2) for r in range(2)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False and code == 0, d["summary"]
    # the same paste from one of two hosts: the ring lists ranks that host does not hold
    lines = [x.replace("    0   1", "    0   1   2   3") for x in lines]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["inter_node"] is not False, d["summary"]


def test_one_host_whose_ranks_did_not_all_print_their_rank_line(tmp_path):
    # A hang report: 4 processes on one host, only rank 0 got as far as its comm line. As
    # many processes as ranks on the one host named: no other node took part.
    streams = L.single_host_job(n=4, host="lab", plugin=False, iface="eth0")
    for s in streams[1:]:
        s[:] = [x for x in s if " nranks " not in x]
    code, d = check(tmp_path, L.interleave(streams, 2))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # three processes for four ranks: more than half the world, which a node of two does
    # not hold (nodes hold as many ranks each): one machine still
    code, d = check(tmp_path, L.interleave(streams[:3], 2))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # two for four: half the world, as one node of two holds; another host may hold the rest
    code, d = check(tmp_path, L.interleave(streams[:2], 2))
    assert d["transport"] == "socket" and d["inter_node"] is None, d["summary"]


def test_mpirun_localhost_two_processes_on_loopback(tmp_path):
    streams = L.single_host_job(n=2, host="localhost", plugin=False, iface="lo")
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert d["transport"] == "none" and d["selected"] == "socket"


def test_two_hosts_each_running_their_own_single_node_communicator(tmp_path):
    a = L.single_host_job(n=6, host="gpu-a", pid0=100, plugin=False, iface="eth0")
    b = L.single_host_job(n=6, host="gpu-b", pid0=200, plugin=False, iface="eth0")
    code, d = check(tmp_path, L.interleave(a + b, 2), "--fabric", "infiniband")
    assert d["transport"] == "none" and d["verdict"] == "single-node" and code == 0
    assert len(d["ranks"]) == 12


@pytest.mark.parametrize("order", ["8-then-4", "4-then-8"])
def test_two_hosts_each_running_their_own_single_node_jobs_of_two_sizes(tmp_path, order):
    # ... of different sizes, 8 ranks on one and 4 on the other, with no nNodes line (NCCL
    # 2.12): each host holds the whole of its own communicator, though not of the larger
    a = L.single_host_job(n=8, host="gpu-x1", pid0=100, plugin=False, iface="eth0",
                          nccl="2.12.12")
    b = L.single_host_job(n=4, host="gpu-x2", pid0=200, plugin=False, iface="eth0",
                          nccl="2.12.12")
    runs = a + b if order == "8-then-4" else b + a
    code, d = check(tmp_path, [x for s in runs for x in s], "--fabric", "infiniband")
    assert d["transport"] == "none" and d["verdict"] == "single-node" and code == 0, \
        d["summary"]
    assert len(d["ranks"]) == 12
    # ... but not where the larger communicator spans hosts: a 12-rank job, 8 ranks on
    # gpu-x1 and 4 on gpu-x2, whose paste kept only gpu-x2's 4-rank group's lines (a
    # helper's regression hunt: both hosts then looked whole)
    world = [[x.replace("nranks 8", "nranks 12") for x in st] for st in a]
    code, d = check(tmp_path, [x for st in world + b for x in st])
    assert d["inter_node"] is True and d["transport"] == "socket", d["summary"]


def _tests_table(host: str, ranks: int, pid0: int) -> list[str]:
    """nccl-tests' table of every rank of its run (rank 0 prints it)."""
    return [f"#  Rank {r:2d} Group  0 Pid {pid0 + r:6d} on {host:>10} device {r:2d} "
            "[0x07] NVIDIA A100-SXM4-80GB" for r in range(ranks)]


def test_two_nccl_tests_runs_pasted_one_per_host_are_two_single_node_runs(tmp_path):
    # two runs pasted one after the other: 8 processes on dgx-a, then 4 on dgx-b; each run's
    # table names one host (the second run's rows once overwrote ranks 0-3 of the first's
    # table, which then seemed to name two hosts for one run)
    a = L.single_host_job(n=8, host="dgx-a", pid0=100, plugin=False, iface="eth0",
                          nccl="2.12.12")
    b = L.single_host_job(n=4, host="dgx-b", pid0=200, plugin=False, iface="eth0",
                          nccl="2.12.12")
    lines = (_tests_table("dgx-a", 8, 100) + [x for s in a for x in s]
             + _tests_table("dgx-b", 4, 200) + [x for s in b for x in s])
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # ... and one run across both hosts (its table names both), pasted twice, crossed nodes
    streams = job(L.ib_rank, nodes=2, gpn=2, nccl="2.12.12", channels=False)
    hosts = [s[0].split(":")[0] for s in streams]
    table = [f"#  Rank {r:2d} Group  0 Pid {40000 + 17 * r:6d} on {hosts[r]:>10} device "
             f"{r % 2:2d} [0x07] NVIDIA A100-SXM4-80GB" for r in range(4)]
    run = table + [x for s in streams for x in s]
    code, d = check(tmp_path, run + run)
    assert d["inter_node"] is True and d["transport"] == "ib", d["summary"]


@pytest.mark.parametrize("net", ["Socket", "AWS Libfabric"])
def test_nnodes_1_means_no_inter_node_traffic_whatever_the_network_lines(tmp_path, net):
    # NCCL_P2P_DISABLE + NCCL_SHM_DISABLE on one node: channels go `via NET/...`, nNodes is 1.
    fn = L.socket_rank if net == "Socket" else L.ofi_cxi_rank
    streams = job(fn, nodes=1, nnodes=1)
    for s in streams:
        s += [x.replace("via P2P/IPC", f"via NET/{net}/0") for x in s if "via P2P/IPC" in x]
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "slingshot")
    assert d["transport"] == "none" and d["inter_node"] is False and code == 0, d["summary"]


def test_subcommunicators_within_node_then_across_nodes(tmp_path):
    streams = []
    for r in range(8):
        h, pid, dev = L.rank_host(r), 40000 + 17 * r, r % 4
        # phase 1: a node-local communicator (4 ranks, nNodes 1), channels over P2P
        s = L.ofi_cxi_rank(h, pid, dev, 4, nnodes=1, env={"NCCL_PROTO": "^LL128"})
        # phase 2: the world communicator (8 ranks, nNodes 2), channels over NET
        s += [L.info(h, pid, dev, m) for m in L.comm_msgs(r, 8, dev, "2.23.4", 2, 4,
                                                          comm=0x66000000)]
        s += [L.info(h, pid, dev, m, tid=pid + 9) for m in
              L.channel_msgs(r, 8, dev, "AWS Libfabric", 4)]
        streams.append(s)
    code, d = check(tmp_path, L.interleave(streams, 6), "--fabric", "slingshot")
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and code == 0
    assert [r["rank"] for r in d["ranks"]] == list(range(8)) and d["world_size"] == 8


def test_redacted_hostnames_are_not_one_host(tmp_path):
    # Reporters replace host names; all ranks then show `<cluster_name>`.
    streams = job(L.socket_rank, nccl="2.10.3", iface="eth0", channels=False, comm=False)
    lines = L.redact(L.interleave(streams, 2), {"nid001000": "<cluster_name>",
                                                "nid001001": "<cluster_name>"})
    code, d = check(tmp_path, lines, "--fabric", "infiniband")
    assert d["transport"] == "socket" and d["verdict"] == "fallback" and code == 1
    # with channel lines, certainly multi-node
    streams = job(L.socket_rank, nccl="2.10.3", iface="eth0")
    lines = L.redact(L.interleave(streams, 2), {"nid001000": "nodea_ip", "nid001001": "nodea_ip"})
    code, d = check(tmp_path, lines, "--fabric", "infiniband")
    assert d["transport"] == "socket" and d["inter_node"] is True


def test_redacted_hosts_told_apart_by_their_bootstrap_addresses(tmp_path):
    # no channel lines, no nNodes: the host names are redacted, the addresses are not
    streams = job(L.legacy_rank, nccl="2.11.4", net="Socket", iface="eth0", ring=False)
    lines = L.redact(L.interleave(streams, 2), {"nid001000": "xxx-xxx-xxx-xxx",
                                                "nid001001": "xxx-xxx-xxx-xxx"})
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and d["inter_node"] is True and d["nodes"] == 2


def _one_host_net_channels(host: str, ranks: range, nranks: int, nccl: str, net: str,
                           iface: str, ip: str | None, pid0: int = 700) -> list[list[str]]:
    """Ranks on one host whose channels go through the network anyway (NCCL_P2P_DISABLE and
    NCCL_SHM_DISABLE, or a container without shared memory): older NCCL prints no nNodes,
    so only the host name, the address and the ranks it holds tell that no node was left.
    `ip` None: the lines name no address at all."""
    streams = []
    for r in ranks:
        pid, dev = pid0 + r, r % 8
        addr = f"{iface}:{ip}<0>" if ip else iface
        msgs = [f"Bootstrap : Using {addr}"] if ip else []
        if net == "IB":
            msgs += [f"NET/IB : Using [0]mlx5_0:1/IB ; OOB {addr}", "Using network IB"]
        else:
            msgs += ["NET/IB : No device found.", f"NET/Socket : Using [0]{addr}",
                     "Using network Socket"]
        if r == 0:
            msgs.insert(0, L.version_msg(nccl))
        msgs.append(f"comm 0x5500{r:02x} rank {r} nranks {nranks} cudaDev {dev} busId 1000 "
                    "- Init COMPLETE")
        lines = [L.info(host, pid, dev, m) for m in msgs]
        peer = (r + 1) % nranks
        lines += [L.info(host, pid, dev, f"Channel {c:02d} : {r}[{dev}] -> {peer}[{peer % 8}] "
                                         f"via NET/{net}/0", tid=pid + 7) for c in range(2)]
        streams.append(lines)
    return streams


@pytest.mark.parametrize("nccl", ["2.5.6", "2.7.8", "2.12.12"])
@pytest.mark.parametrize("net,iface,ip", [("Socket", "lo", "127.0.0.1"),
                                          ("Socket", "eno1", "10.1.2.3"),
                                          ("IB", "ib0", "10.2.0.7"), ("Socket", "eth0", None)])
def test_one_host_holding_every_rank_is_none_even_with_net_channels(tmp_path, nccl, net, iface,
                                                                     ip):
    # No nNodes line (NCCL < 2.18): channels `via NET/...` between ranks of one host are not
    # inter-node traffic (fabric-facts: "One host is not a network").
    streams = _one_host_net_channels("ws-gpu", range(2), 2, nccl, net, iface, ip)
    code, d = check(tmp_path, L.ompi_tag(L.interleave(streams, 1), 0) if ip else
                    L.interleave(streams, 1))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    assert d["verdict"] == "single-node" and code == 0 and d["nodes"] == 1
    assert d["selected"] == net.lower() and d["nccl_version"] == nccl


@pytest.mark.parametrize("nccl", ["2.7.8", "2.12.12"])
def test_net_channels_stay_inter_node_when_the_log_cannot_be_one_host(tmp_path, nccl):
    # One node's own log of a 2-node job: the ranks of the other node are missing.
    half = _one_host_net_channels("gpu-a", range(4), 8, nccl, "IB", "ib0", "10.2.0.7")
    code, d = check(tmp_path, L.interleave(half, 2))
    assert d["transport"] == "ib" and d["inter_node"] is True, d["summary"]
    # one host named, traffic to another node: the job spans at least two (not the 1 host)
    assert d["nodes"] == 2
    # ... and without the channels, nothing says whether other hosts took part: unknown
    code, d = check(tmp_path, L.interleave([[x for x in s if "via NET" not in x]
                                            for s in half], 2))
    assert d["inter_node"] is None and d["nodes"] is None, d["summary"]
    # Every rank, one host name, two addresses: containers that share a host name.
    a = _one_host_net_channels("worker", range(2), 4, nccl, "Socket", "eth0", "172.18.0.2")
    b = _one_host_net_channels("worker", range(2, 4), 4, nccl, "Socket", "eth0", "172.18.0.3")
    code, d = check(tmp_path, L.interleave(a + b, 2))
    assert d["transport"] == "socket" and d["inter_node"] is True, d["summary"]
    # A host with two NICs lists both addresses on every rank: still one host.
    two = [[x.replace("[0]eth0:172.18.0.2<0>", "[0]eth0:172.18.0.2<0> [1]eth1:172.19.0.2<0>")
            for x in s] for s in a]
    two += _one_host_net_channels("worker", range(2, 4), 4, nccl, "Socket", "eth0",
                                  "172.18.0.2")
    two[2:] = [[x.replace("[0]eth0:172.18.0.2<0>", "[0]eth1:172.19.0.2<0> [1]eth0:172.18.0.2<0>")
                for x in s] for s in two[2:]]
    code, d = check(tmp_path, L.interleave(two, 2))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]


@pytest.mark.parametrize("nnodes", [True, False])
def test_a_host_whose_name_ends_another_is_its_own_host(tmp_path, nnodes):
    # `gpu1` runs ranks 0-3, `agpu1` rank 4: a real host, not a cut `gpu1` (the cut-host
    # merge folds only names whose pid, rank and address can be the other's).
    nccl = "2.20.5" if nnodes else "2.12.12"
    streams = [L.ib_rank(h, pid, r, 5, nccl=nccl, gpn=4, nnodes=2 if nnodes else None)
               for r, (h, pid) in enumerate([("gpu1", 100), ("gpu1", 101), ("gpu1", 102),
                                             ("gpu1", 103), ("agpu1", 200)])]
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert [(r["rank"], r["host"]) for r in d["ranks"]] == [
        (0, "gpu1"), (1, "gpu1"), (2, "gpu1"), (3, "gpu1"), (4, "agpu1")]
    assert d["nodes"] == 2 and d["transport"] == "ib"
    # one rank each, the same pid (containers), unequal line counts: still two hosts
    streams = [L.socket_rank(h, 4100, r, 2, nccl=nccl, gpn=1, iface="eth0")
               for r, h in enumerate(["cn1", "n1"])]
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert [(r["rank"], r["host"]) for r in d["ranks"]] == [(0, "cn1"), (1, "n1")]
    assert d["nodes"] == 2 and d["transport"] == "socket"


@pytest.mark.parametrize("prefix", ["trn-w0: ", "    ", "[pod/trainer-0/pytorch] ", "[0] ",
                                    "Dec 04 05:27:39 gpu-j1 python3[7781]: "])
def test_version_line_under_any_prefix(tmp_path, prefix):
    # NCCL_DEBUG=VERSION-style `NCCL version X` line (no NCCL prefix) after a pdsh, kubectl,
    # journald or rank prefix, or an indent. The version decides the LL128 warning.
    streams = job(L.ofi_cxi_rank, nccl="2.27.3", version_line=False)
    lines = [prefix + L.version_msg("2.27.3")] + L.interleave(streams, 2)
    code, d = check(tmp_path, lines, "--fabric", "slingshot")
    assert d["nccl_version"] == "2.27.3" and d["transport"] == "ofi", d["summary"]
    assert "ll128-hazard" in [w["code"] for w in d["warnings"]]
    # a sentence that mentions a version is not the version line
    lines = [prefix + "warning: built with NCCL version 2.27.3 but loaded another one"]
    code, d = check(tmp_path, lines + L.interleave(streams, 2), "--fabric", "slingshot")
    assert d["nccl_version"] is None


def test_a_rank_whose_provider_line_is_missing_is_not_another_transport(tmp_path):
    # A pasted log cut one rank's init: it shows only `via NET/AWS Libfabric` channel lines.
    streams = job(L.ofi_efa_rank)
    streams[5] = [x for x in streams[5] if "Selected Provider" not in x]
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "ofi" and d["provider"] == "efa" and d["mixed"] is False
    assert d["summary"].startswith("fabrikit: transport OFI/efa on 8/8 ranks"), d["summary"]
    assert [r["provider"] for r in d["ranks"]].count(None) == 1  # its own lines name none
    # two providers named: mixed, whatever the rank without one did
    streams[6] = [x.replace("Provider is efa", "Provider is tcp") for x in streams[6]]
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["mixed"] is True and "OFI/tcp on 1/8" in d["summary"], d["summary"]


def _one_process_per_host(hosts: list[str], gpn: int, nccl: str = "2.18.3") -> list[list[str]]:
    """nccl-tests `-g 8`: one process per host drives every GPU; each GPU's lines carry its
    own `[dev]` and thread, and each prints its own rank's comm and channel lines."""
    nranks, streams = len(hosts) * gpn, []
    for n, host in enumerate(hosts):
        pid, s = 3000 + n, []
        for dev in range(gpn):
            r = n * gpn + dev
            p = dict(host=host, pid=pid, dev=dev, tid=pid + 40 + dev)
            if r == 0:
                s.append(L.info(msg=L.version_msg(nccl), **p))
            s += [L.info(msg=m, **p) for m in (
                f"NET/IB : Using [0]mlx5_{dev}:1/IB [RO]; OOB ib0:10.3.0.{n + 1}<0>",
                "Using network IB")]
            s += [L.info(msg=m, **p) for m in L.channel_msgs(r, nranks, dev, "IB", gpn)]
            s.append(L.info(msg=f"comm 0x7f{r:02x} rank {r} nranks {nranks} cudaDev {dev} "
                                "busId 1000 - Init COMPLETE", **p))
        streams.append(s)
    return streams


def test_one_process_driving_several_gpus_reports_each_of_its_ranks(tmp_path):
    streams = _one_process_per_host(["swat-04", "swat-05"], 8)
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "infiniband")
    assert [(r["rank"], r["host"]) for r in d["ranks"]] == (
        [(r, "swat-04") for r in range(8)] + [(r, "swat-05") for r in range(8, 16)])
    assert d["summary"].startswith("fabrikit: transport IB/") and "on 16/16 ranks" in d["summary"]
    assert d["transport"] == "ib" and d["world_size"] == 16 and code == 0
    # one GPU per process, two communicators of the same size with other ranks (tensor and
    # data parallel groups): one process is one rank, as before
    tp_dp = []
    for r in range(4):
        h, pid = f"gpu{r // 2}", 500 + r
        s = L.ib_rank(h, pid, r, 4, gpn=2)
        s.append(L.info(h, pid, r % 2, f"comm 0x9f{r:02x} rank {(r + 1) % 4} nranks 4 "
                                        f"cudaDev {r % 2} busId 1000 - Init COMPLETE"))
        tp_dp.append(s)
    code, d = check(tmp_path, L.interleave(tp_dp, 1))
    assert len(d["ranks"]) == 4 and d["transport"] == "ib"


# --------------------------------------------------------------------------------------------
# RCCL (LUMI: aws-ofi-rccl over cxi; UCX; sockets over hsn)


@pytest.mark.parametrize("new_banner", [False, True])
def test_rccl_aws_ofi_rccl_on_cxi(tmp_path, new_banner):
    streams = L.job(L.rccl_rank, nodes=2, gpn=8, new_banner=new_banner)
    code, d = check(tmp_path, L.interleave(streams, 3), "--fabric", "slingshot")
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and code == 0, d["summary"]
    assert d["library"] == "rccl" and d["nccl_version"] == "2.18.3"
    assert d["plugin_version"] == "1.4.0" and "aws-ofi-rccl 1.4.0" in d["summary"]
    assert "ll128-hazard" not in [w["code"] for w in d["warnings"]]
    assert d["summary"].startswith("fabrikit: transport OFI/cxi on 16/16 ranks (RCCL 2.18.3")


def test_rccl_ucx_plugin_is_ib(tmp_path):
    streams = L.job(L.rccl_rank, nodes=2, gpn=8, net="UCX")
    code, d = check(tmp_path, L.interleave(streams, 3), "--fabric", "infiniband")
    assert d["transport"] == "ib" and d["library"] == "rccl" and code == 0
    assert all(r["ib_devices"] == ["mlx5_0:1"] for r in d["ranks"])


def test_rccl_socket_fallback_on_hsn(tmp_path):
    streams = L.job(L.rccl_rank, nodes=2, gpn=8, net="Socket")
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "socket" and d["fabric"] == "slingshot" and code == 1
    assert all(r["plugin_missing"] for r in d["ranks"])


def test_rccl_single_node(tmp_path):
    streams = L.job(L.rccl_rank, nodes=1, gpn=8)
    code, d = check(tmp_path, L.interleave(streams, 3))
    assert d["transport"] == "none" and d["selected"] == "ofi" and d["provider"] == "cxi"


# --------------------------------------------------------------------------------------------
# Providers named only by libfabric's own lines or FI_* settings


def test_provider_from_libfabric_lines_on_a_failed_job(tmp_path):
    lines = []
    for r in range(4):
        h, pid = f"algo-{r // 2 + 1}", 17700 + r
        lines += [L.info(h, pid, r % 2, "NET/Plugin: Loaded net plugin Libfabric (v8)"),
                  L.info(h, pid, r % 2, "Using network Libfabric"),
                  f"libfabric:{pid}:1732779731::efa:ep_ctrl:efa_rdm_ep_open():551<warn> "
                  "Unable to create endpoint: Invalid argument",
                  *L.warn(h, pid, r % 2, "NET/OFI Creating new endpoint for domain 0x7f9b failed: "
                          "Invalid argument", where="nccl_net_ofi_domain_get_ep:969"),
                  L.info(h, pid, r % 2, "init.cc:1440 -> 2")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["attempted"] == "ofi" and d["provider"] == "efa"
    assert all(r["provider"] == "efa" for r in d["ranks"])


def test_provider_from_libfabric_cxi_warnings_without_a_provider_line(tmp_path):
    streams = job(L.ofi_cxi_rank)
    streams = [[x for x in s if "Selected Provider" not in x] for s in streams]
    streams[0].insert(2, "libfabric:40000:1741146011::cxi:fabric:cxip_nic_get_rgroup_vni():253"
                         "<warn> : Failed to find valid default rgroup and vni for cxi0")
    code, d = check(tmp_path, L.interleave(streams, 2))
    assert d["transport"] == "ofi" and d["provider"] == "cxi"
    assert d["ranks"][0]["provider"] == "cxi"


@pytest.mark.parametrize("echo,want", [
    ("FI_PROVIDER=efa", "efa"),
    ("+ export FI_PROVIDER=cxi", "cxi"),
    ("mpirun -x FI_PROVIDER=\"efa\" -x FI_EFA_USE_DEVICE_RDMA=1 ./all_reduce_perf", "efa"),
    ("FI_CXI_DEFAULT_CQ_SIZE=131072", "cxi"),
    ("libfabric:88:1700000000:efa:core:rxr_info_to_rxr():506<warn> FI_HMEM capability "
     "requires RDMA", "efa"),
    # libfabric ~1.17 (no timestamp, open-mpi/ompi#11412), <= ~1.7 (no pid either)
    ("libfabric:2833295:efa:core:fi_param_get_():280<info> variable use_device_rdma", "efa"),
    ("libfabric:verbs;ofi_rxm:cq:rxm_cq_read_write_error():819<warn> fi_cq_readerr", "verbs"),
])
def test_provider_from_fi_settings_and_old_libfabric_lines(tmp_path, echo, want):
    streams = job(L.ofi_cxi_rank)
    streams = [[x for x in s if "Selected Provider" not in x] for s in streams]
    code, d = check(tmp_path, [echo, *L.interleave(streams, 2)])
    assert d["transport"] == "ofi" and d["provider"] == want


def test_plugin_sets_fi_efa_variables(tmp_path):
    # aws-ofi-nccl's EFA settings name the provider ...
    streams = job(L.ofi_cxi_rank)
    efa = [[x.replace("NET/OFI Selected Provider is cxi (found 8 nics)",
                      "NET/OFI Setting FI_EFA_USE_DEVICE_RDMA environment variable to 1")
            for x in s] for s in streams]
    code, d = check(tmp_path, L.interleave(efa, 2))
    assert d["provider"] == "efa" and all(r["provider"] == "efa" for r in d["ranks"])
    # ... but not FI_EFA_FORK_SAFE, which old plugins (aws-ofi-rccl 1.4 on LUMI's cxi) set
    # whatever the provider
    fork = [[x.replace("NET/OFI Selected Provider is cxi (found 8 nics)",
                       "NET/OFI Setting FI_EFA_FORK_SAFE environment variable to 1")
             for x in s] for s in streams]
    code, d = check(tmp_path, L.interleave(fork, 2))
    assert d["transport"] == "ofi" and d["provider"] is None, d["summary"]


# --------------------------------------------------------------------------------------------
# Line shapes, and their combinations


def test_old_format_inside_open_mpi_tag_inside_cloudwatch(tmp_path):
    streams = job(L.legacy_rank, nccl="2.4.8", net="AWS Libfabric", provider="efa")
    tagged = [L.ompi_tag(s, r) for r, s in enumerate(streams)]
    lines = L.cloudwatch(L.interleave(tagged, 8))
    assert lines[0].startswith("  | 2024-12-04T05:27:") and "]<stdout>:" in lines[0]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ofi" and d["provider"] == "efa" and code == 0
    assert ranks_of(d) == [(r, "ofi", "efa") for r in range(8)]


def test_cloudwatch_with_failure_and_fallback_mix(tmp_path):
    streams = job(L.ofi_efa_rank, nccl="2.23.4")[:4] + job(L.ofi_fails_then)[4:]
    lines = L.cloudwatch(L.interleave(streams, 3))
    code, d = check(tmp_path, lines)
    assert [r["transport"] for r in d["ranks"]] == ["ofi"] * 4 + ["socket"] * 4
    assert d["transport"] == "socket" and d["mixed"]


@pytest.mark.parametrize("keep_dev", [True, False])
def test_stripped_prefixes_one_rank_per_file(tmp_path, keep_dev):
    streams = job(L.ib_rank)
    paths = []
    for r, s in enumerate(streams):
        p = L.write_log(tmp_path / f"rank{r}.log", L.strip_prefix(s, keep_dev=keep_dev))
        paths.append(str(p))
    res = CliRunner().invoke(check_log, [*paths, "--json", "--fabric", "infiniband"])
    d = json.loads(res.output)
    assert d["transport"] == "ib" and res.exit_code == 0 and len(d["ranks"]) == 8
    assert [r["rank"] for r in d["ranks"]] == list(range(8))


def test_stripped_host_and_level_a_pasted_snippet(tmp_path):
    # reporters drop `host:pid:tid [dev] NCCL INFO` entirely
    lines = L.strip_prefix(job(L.ofi_cxi_rank)[0], keep_level=False)
    assert lines[2].startswith("Bootstrap : Using")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and len(d["ranks"]) == 1


def test_channel_lines_cut_to_their_peers_still_name_the_network(tmp_path):
    # a report quoting two ranks' links, cut to `send -> recv [dir] via NET/...` (nccl#897's
    # shape: its ranks 9 and 2 on two nodes, one end without GDR; a PXN write-up's
    # `via NET/IB/3(19)`, the proxy rank in brackets, with the author's note after it)
    lines = ["9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA",
             "9[1a000] -> 2[6b000] [receive] via NET/IB/1"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], code) == ("ib", True, 0), d["summary"]
    code, d = check(tmp_path, ["17[1] -> 3[3] [send] via NET/IB/3(19)/GDRDMA/Shared    (sender "
                               "side, Channel 03/1, 11/1)"])
    assert (d["transport"], d["inter_node"]) == ("ib", True), d["summary"]
    code, d = check(tmp_path, ["0[0] -> 1[1] via NET/AWS Libfabric/0/GDRDMA",
                               "NET/OFI Selected Provider is efa (found 4 nics)"])
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]
    # an application's own arrow is no NCCL link: the network name must follow `via NET/`
    code, d = check(tmp_path, ["step 3 -> 4 via NETWORK sync", "epoch 1 -> 2 via NET"])
    assert d["transport"] == "none"


def test_gdrcopy_missing_is_no_network_failure(tmp_path):
    # aws-ofi-nccl without /dev/gdrdrv warns and goes on: GDRCopy only speeds up small
    # copies (healthy EFA runs print it; a DeepEP GIN write-up's 2-node job ran on EFA)
    streams = job(L.ofi_efa_rank)
    streams = [L.warn(s[0].split(" ")[0], 40000 + 17 * r, r % 4,
                      "NET/OFI Failed to initialize GDRCopy: Failed to open gdr handle",
                      where="nccl_ofi_gdrcopy.cpp:61") + s for r, s in enumerate(streams)]
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert (d["transport"], d["provider"], code) == ("ofi", "efa", 0), d["summary"]
    assert not any(r["failure"] for r in d["ranks"])
    code, d = check(tmp_path, [
        "NCCL WARN NET/OFI Failed to initialize GDRCopy: Failed to open gdr handle",
        "NCCL INFO GIN/Plugin: Loaded gin plugin Libfabric_GDAKI (v14)",
        "NCCL INFO NET/OFI gin: Initializing",
        "NCCL INFO GIN/Plugin: Failed to initialize any GIN plugin"])
    assert d["transport"] != "failed", d["summary"]


def test_init_line_elided_by_its_author_still_gives_the_communicator_size(tmp_path):
    # notes on a one-GPU probe of a B300 node: `ncclCommInitRankConfig ... rank 0 nranks 1
    # ... Init START`; a communicator of one rank moves nothing between nodes
    head = ["NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v10 (v10)",
            "NCCL INFO P2P plugin v10 IBext_v10",
            "NCCL INFO Using network NCCL RDMA Plugin v10"]
    code, d = check(tmp_path, head + [
        "NCCL INFO ncclCommInitRankConfig ... rank 0 nranks 1 ... Init START"])
    assert (d["transport"], d["world_size"], d["inter_node"]) == ("none", 1, False), d["summary"]
    code, d = check(tmp_path, head + [
        "NCCL INFO ncclCommInitRank \u2026 rank 3 nranks 16 \u2026 Init START"])
    assert (d["transport"], d["world_size"]) == ("ib", 16), d["summary"]


def test_a_verbs_call_s_warn_quoted_without_nccl_s_words_is_a_failed_ib_setup(tmp_path):
    # write-ups of RoCE bring-ups quote NCCL's verbs wrapper without `NCCL WARN` (two DGX
    # Sparks through a switch, GID types that differ; an RCCL cluster with no L2 path), some
    # cut to `ibv_modify_qp failed with ...` and wrapped over lines
    code, d = check(tmp_path, [
        "Call to ibv_modify_qp failed with 110 Connection timed out, on dev rocep1s0f1:1, curr "
        "state INIT, next state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID "
        "::ffff:10.0.0.2"])
    assert (d["transport"], d["attempted"], code) == ("failed", "ib", 1), d["summary"]
    code, d = check(tmp_path, ["ibv_modify_qp failed with 110 Connection timed out,",
                               "remote GID ::ffff:169.254.60.178"])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]
    # with NCCL's words it was read so already; a sentence that names a verbs tool is not one
    code, d = check(tmp_path, ["nid1:7:7 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp "
                               "failed with 22 Invalid argument, on dev mlx5_0:1"])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]
    code, d = check(tmp_path, ["ibv_devinfo failed to list the HCAs, see below"])
    assert d["transport"] == "none"


def test_bare_lines_in_an_indented_code_block(tmp_path):
    # a markdown list's code block (a status report of two GB10 nodes; a fault-recovery
    # README that killed a peer mid-run): the indent is no part of NCCL's line
    code, d = check(tmp_path, [
        "NCCL",
        "  Transport: RDMA/RoCE (2 HCA(s))",
        "  NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB "
        "enp1s0f1np1:10.100.184.1<0>"])
    assert d["transport"] == "ib", d["summary"]
    code, d = check(tmp_path, ["\tUsing network IB", "\t  NET/IB : Using [0]mlx5_0:1/IB ; OOB "
                               "ib0:10.0.0.1<0>"])
    assert d["transport"] == "ib", d["summary"]
    code, d = check(tmp_path, [
        "  NET/IB: Got completion from peer 30.0.0.4<37215> with status=12 opcode=129 len=524288 "
        "vendor err 129 (Recv) localGid ::ffff:30.0.0.3 remoteGidsfe80::1 hca mlx5_1"])
    assert d["transport"] == "ib" and "link-failed" in {w["code"] for w in d["warnings"]}


def test_pytorch_s_count_of_completed_nccl_work_means_init_was_done(tmp_path):
    # a node killed mid-run (NCCL_DEBUG=WARN, so no network line): PyTorch's watchdog says
    # 88 all-reduces completed, then the survivor's sockets to it close. A running job's
    # break, not a failed init
    h, peer = "gke-a3-high-pool-njnx", "gke-a3-high-pool-zcn4.internal<55912>"

    def log(completed: str) -> list[str]:
        return ["NCCL version 2.22.3+cuda12.6",
                "[rank0]:[E724 06:56:39.48 ProcessGroupNCCL.cpp:542] [Rank 0] Collective "
                "WorkNCCL(SeqNum=89, OpType=ALLREDUCE, Timeout(ms)=90000) raised the following "
                "async exception: NCCL error: remote process exited or there was a network error",
                "[rank0]:[E724 06:56:39.48 ProcessGroupNCCL.cpp:1795] [PG ID 0 PG GUID 0"
                "(default_pg) Rank 0] Exception (either an error or timeout) detected by "
                f"watchdog at work: 89, last enqueued NCCL work: 89, last completed NCCL work: "
                f"{completed}."] + [
            x for _ in range(3) for x in L.warn(h, 110, 0, "socketProgress: Connection closed "
                                                         f"by remote peer {peer}",
                                                  where="misc/socket.cc:50")]

    code, d = check(tmp_path, log("88"))
    assert (d["transport"], code) == ("none", 0), d["summary"]
    says = {w["code"]: w["message"] for w in d["warnings"]}
    assert "Connection closed by remote peer" in says["link-failed"], says
    assert "the log does not name the network NCCL chose" in says["link-failed"]
    # none completed (older releases print -1, or an unset counter's huge number): as before
    for none_done in ("-1", "1081146416430583048"):
        code, d = check(tmp_path, log(none_done))
        assert d["transport"] == "failed", (none_done, d["summary"])


def test_gib_queue_pair_line_says_ib(tmp_path):
    # Google's gIB plugin (A4, Ray on GKE): the one NCCL line a results paste kept is a queue
    # pair's, its name glued to its colon and the line cut. The alias was renamed up to the
    # first blank, which took the colon with it
    code, d = check(tmp_path, [
        "(Worker pid=3590, ip=10.48.4.17) a4-ray-worker-pbkpw:3590:3778 [6] NCCL INFO NET/gIB: "
        "IbDev 6 Port 1 qpn 2440 se", "  Tensor 0 (originally on cuda:0): tensor([24., 24.])"])
    assert d["transport"] == "ib", d["summary"]
    code, d = check(tmp_path, [L.info("gke-w-1", 3704, 0, "NET/gIB : Using [0]mlx5_0:1/RoCE [1]"
                                                          "mlx5_1:1/RoCE ; OOB eth0:10.52.2.7<0>")])
    assert d["transport"] == "ib" and d["ranks"][0]["ib_devices"] == ["mlx5_0:1", "mlx5_1:1"]


def test_error_chains_that_name_their_function(tmp_path):
    # NCCL >= 2.28 prints the function in its chain lines: `init.cc:1565 (initTransportsRank)
    # -> 2` (a vLLM worker's NVLS setup; two DGX Sparks whose DMA-BUF registration failed)
    h = "spark-01"
    head = [L.info(h, 2736, 0, m) for m in ("NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB "
                                            "enp1s0f1np1:10.0.0.1<0>", "Using network IB")]
    chain = [L.info(h, 2736, 0, m) for m in ("transport/net.cc:1006 (sendProxyConnect) -> 2",
                                             "init.cc:1565 (initTransportsRank) -> 2",
                                             "init.cc:1921 (ncclCommInitRankFunc) -> 2")]
    code, d = check(tmp_path, head + chain)
    assert (d["transport"], d["attempted"], code) == ("failed", "ib", 1), d["summary"]
    # quoted without any prefix, the WARN first, then a line of IB's set-up the author kept
    code, d = check(tmp_path, [
        "misc/ibvwrap.cc:213 (wrap_ibv_reg_mr_iova2) NCCL WARN Call to ibv_reg_mr_iova2 failed "
        "with error Cannot allocate memory",
        "transport/net_ib/reg.cc:81 (ncclIbRegMrDmaBufInternal) -> 2",
        "transport/net.cc:1006 (sendProxyConnect) -> 2", "init.cc:1565 (initTransportsRank) -> 2",
        "", "NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'"])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]


def test_libfabric_efa_aborting_at_endpoint_open_fails_the_ofi_init(tmp_path):
    # two g5s with one EFA each: aws-ofi-nccl chose efa, then libfabric's EFA provider found
    # no RDMA read on the device that FI_EFA_USE_DEVICE_RDMA=1 asked for, and called abort()
    # (a write-up's two blocks, its author's wrap kept)
    lines = ["NET/OFI Selected provider is efa, fabric is efa (found 1 nics)",
             "NET/OFI NIC group 0 device #0 0000:00:1d.0", "",
             "FI_EFA_USE_DEVICE_RDMA=1 was set by user, but EFA device has no",
             "rdma-read capability.  Application will abort()."]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], d["provider"]) == ("failed", "ofi", "efa"), d["summary"]
    # the setting echoed by a job script is no failure
    code, d = check(tmp_path, lines[:2] + ["export FI_EFA_USE_DEVICE_RDMA=1"])
    assert d["transport"] == "ofi", d["summary"]


def test_tcpx_registration_failure_quoted_bare_fails_the_socket_plugin(tmp_path):
    # a GKE runbook's tier where every rank died registering GPU memory with TCPX: the
    # plugin's lines quoted without prefix or level; its WARN reads failed, attempted socket
    lines = ["NET/GPUDirectTCPX : ioctl get dma_buf frags: Inappropriate ioctl for device",
             "NET/GPUDirectTCPX : gpu_tx_reg_mr failed -5",
             "Error encountered progressing operation=Connect, res=3"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], code) == ("failed", "socket", 1), d["summary"]


@pytest.mark.parametrize("plugin", ["FasTrak", "GPUDirectTCPXO", "GPUDirectTCPX"])
def test_a_tcp_plugins_own_warn_names_the_socket_transport(tmp_path, plugin):
    # A3 Mega's TCPXO plugin (FasTrak) failing to register a buffer, then its receive: the
    # only network the paste names is that plugin, a TCP one; its WARNs say what was tried
    lines = [f"NCCL WARN NET/{plugin} ...: INVALID_ARGUMENT: Buffer registration request does "
             "not have a valid fd set.",
             f"NCCL WARN NET/{plugin} ...: FAILED_PRECONDITION: receive() error: 32: Broken pipe"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], code) == ("failed", "socket", 1), d["summary"]


def test_a_channel_line_that_left_its_index_out_still_names_a_whole_network(tmp_path):
    # a guide's example of a job that crossed nodes over Ethernet: `via NET/Socket` with the
    # index trimmed; a name cut short (`via NET/Soc`) still names nothing
    code, d = check(tmp_path, ["Ring 00 : 3[b0000] -> 4[b0000] via NET/Socket"])
    assert (d["transport"], d["inter_node"]) == ("socket", True), d["summary"]
    code, d = check(tmp_path, ["nid1:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] via NET/Soc"])
    assert d["transport"] == "none", d["summary"]


def test_cumem_probe_warn_is_no_network_failure(tmp_path):
    # NCCL's (RCCL's) cuMem capability probe warns and goes without cuMem; on two consumer
    # Radeons the real fault is the kernel launch after it (no PCIe atomics, no hostcall)
    lines = ["NCCL WARN HIP failure 'the operation cannot be performed in the present state'",
             "  at .../src/enqueue.cc:2061", "NCCL WARN cuMem support requires VMM RDMA support"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none", d["summary"]
    # in a job that chose IB and completed init, it fails nothing either
    h = "gpu-a1"
    code, d = check(tmp_path, [L.info(h, 7, 0, m) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>", "Using network IB")] + L.warn(
        h, 7, 0, "cuMem support requires VMM RDMA support", where="misc/cudawrap.cc:98") + [
        L.info(h, 7, 0, "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")])
    assert (d["transport"], code) == ("ib", 0), d["summary"]


def test_a_device_list_an_author_condensed_still_names_ib(tmp_path):
    # notes on a 4 x 8 H800 RoCE run: `[0..7]mlx5_bond_*:1/RoCE` for eight bonded ports
    code, d = check(tmp_path, [
        "NET/IB : Using [0..7]mlx5_bond_*:1/RoCE [RO]; OOB eth0:<private-ip><0>",
        "NET/IB : GPU Direct RDMA (nvidia-peermem) enabled",
        "ncclCommInitRankConfig comm 0x... rank 0 nranks 32 cudaDev 0 - Init COMPLETE"])
    assert d["transport"] == "ib" and d["ranks"][0]["ib_devices"] == ["mlx5_bond_*:1"], d["summary"]


def test_lines_kept_as_items_of_a_json_or_code_list(tmp_path):
    # a test's fixture or a demo's data keeps log lines as string items: the closing quote
    # and the item's comma are no part of the network's name
    for q in ('"', "'"):
        lines = [f"{q}{L.info(h, 7, 0, 'Using network AWS Libfabric')}{q}," for h in ("a1", "b1")]
        code, d = check(tmp_path, lines)
        assert d["transport"] == "ofi" and not d["warnings"], d["summary"]
        assert d["ranks"][0]["network"] == "AWS Libfabric"
    # a message that ends with a quoted name keeps its quotes
    code, d = check(tmp_path, [L.info("a1", 7, 0, "NET/IB : GPU Direct RDMA Enabled for HCA 0 "
                                                   "'mlx5_0'")])
    assert d["transport"] == "ib", d["summary"]


def test_nccl_2_30_ib_lines_of_a_resiliency_write_up(tmp_path):
    # a write-up of NCCL 2.30's IB resiliency on two RoCE hosts, lines quoted bare
    head = ["NCCL version 2.30.7+cuda13.3", "NCCL_IB_HCA set to mlx5_1,mlx5_3",
            "NET/IB : Made virtual device [0] name=mlx5_1 speed=100000 ndevs=1 rail=-1 plane=-1",
            "NET/IB : Made virtual device [1] name=mlx5_3 speed=100000 ndevs=1 rail=-1 plane=-1"]
    # its advice that one device has nothing to fail over to fails nothing
    code, d = check(tmp_path, head + [
        "NCCL WARN NET/IB: Resiliency is enabled on a send communicator (...) with a single "
        "device. This does not make sense since there is no other device to fail over to.",
        "Collective test concluded: all_reduce_perf"])
    assert (d["transport"], code) == ("ib", 0), d["summary"]
    # the virtual devices alone say IB was set up (a fail-over that recovered)
    code, d = check(tmp_path, head[:2] + [
        "NET/IB : Made virtual device [2] name=mlx5_0+mlx5_1 speed=200000 ndevs=2 rail=-1",
        "Device 0 marked as failed. Initiating recovery? Yes (recv comm=...)",
        "Port recovery succeeded for devIndex=0 (send comm=...)"])
    assert d["transport"] == "ib", d["summary"]
    # a failure passed up by the proxy's progress function (NCCL >= 2.28 names it) is a
    # running link's: a GDR flush's post_send after IB had carried data
    code, d = check(tmp_path, head + [
        "include/ibvwrap.h:80 (wrap_ibv_post_send) NCCL WARN ibv_post_send() failed with error "
        "Cannot allocate memory", "transport/net_ib/p2p.cc:557 (ncclIbIflush) -> 2",
        "transport/net.cc:1684 (recvProxyProgress) -> 2"])
    assert d["transport"] == "ib" and "link-failed" in {w["code"] for w in d["warnings"]}
    # fusing NICs of two NUMA domains fails the IB init (invalid argument)
    code, d = check(tmp_path, head + [
        "TOPO/NET : Force-fusing NICs using NCCL_NET_FORCE_MERGE=mlx5_1,mlx5_3",
        "graph/topo.cc:1566 (ncclTopoGetVNicParent) NCCL WARN Fusing NET devices from different "
        "NUMA domains is not supported.",
        "Test NCCL failure common.cu:212 'invalid argument (run with NCCL_DEBUG=WARN for details) / '"])
    assert (d["transport"], d["attempted"], code) == ("failed", "ib", 1), d["summary"]


def test_trace_timestamps_and_trace_lines(tmp_path):
    streams = [L.trace_timestamps(s) for s in job(L.socket_rank, iface="hsn0")]
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert d["transport"] == "socket" and d["fabric"] == "slingshot" and code == 1
    assert len(d["ranks"]) == 8


@pytest.mark.parametrize("seed", range(4))
def test_spliced_lines_with_old_formats_and_tags(tmp_path, seed):
    streams = job(L.legacy_rank, nccl="2.6.4", net="IB", iface="ib0")
    tagged = [L.ompi_tag(s, r) for r, s in enumerate(streams)]
    lines = L.cut_merge(L.interleave(tagged, seed), seed, rate=0.08)
    code, d = check(tmp_path, lines, "--fabric", "infiniband")
    assert d["transport"] == "ib" and code == 0
    assert {r["transport"] for r in d["ranks"]} <= {"ib", "none"}


def test_app_output_and_open_mpi_help_text_interleaved(tmp_path):
    streams = job(L.ib_rank)
    streams.append([L.app_noise(i) for i in range(50)] + L.OMPI_HELP * 3)
    code, d = check(tmp_path, L.interleave(streams, 1), "--fabric", "infiniband")
    assert d["transport"] == "ib" and len(d["ranks"]) == 8 and code == 0


def test_srun_label_and_stripped_host_with_redaction(tmp_path):
    streams = job(L.ofi_cxi_rank, env={"NCCL_PROTO": "^LL128"})
    labelled = [L.outer_prefix(L.strip_prefix(s, keep_dev=True), "srun", rank=r)
                for r, s in enumerate(streams)]
    code, d = check(tmp_path, L.interleave(labelled, 2), "--fabric", "slingshot")
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and code == 0


def test_a_two_word_bracket_prefix_names_the_host(tmp_path):
    # a README that shortened Ray's `(pid=..., ip=...)` prefixes to `[node <ip>]`, with
    # NCCL's own prefix gone: `[node 192.168.184.241] NCCL INFO Using network Libfabric`
    lines = []
    for ip in ("192.168.184.241", "192.168.131.7"):
        lines += [f"[node {ip}] NCCL INFO {m}" for m in (
            "NET/OFI Initializing aws-ofi-nccl 1.21.1",
            "NET/OFI Selected provider is efa, fabric is efa-direct (found 8 nics)",
            "Using network Libfabric")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]
    assert sorted(r["host"] for r in d["ranks"]) == ["192.168.131.7", "192.168.184.241"]


@pytest.mark.parametrize("keep_level", [True, False])
def test_open_mpi_tags_that_a_web_page_html_escaped(tmp_path, keep_level):
    # a page's copy of an Open MPI job stripped of NCCL's prefix: `[1,0]&lt;stdout&gt;:NET/OFI
    # Selected Provider is cxi (found 4 nics)`; the bare pass did not know the escaped tag,
    # and only the lines other passes find (the version, `via NET/`) were read: `OFI/?`
    streams = job(L.ofi_cxi_rank, nodes=2, gpn=2)
    tagged = L.interleave([L.ompi_tag(L.strip_prefix(s, keep_level=keep_level), r)
                           for r, s in enumerate(streams)], 4)
    escaped = [html.escape(x, quote=True) for x in tagged]
    assert all(x.startswith("[1,") and "&lt;stdout&gt;:" in x for x in escaped)
    code, want = check(tmp_path, tagged, name="tagged.log")
    code2, got = check(tmp_path, escaped)
    assert (want["transport"], want["provider"]) == ("ofi", "cxi"), want["summary"]
    assert (got["transport"], got["provider"], len(got["ranks"]), got["plugin_version"]) == (
        "ofi", "cxi", 4, "1.6.0"), got["summary"]
    assert [r["provider"] for r in got["ranks"]] == ["cxi"] * 4 and code2 == code


def test_a_paste_that_a_web_page_html_escaped(tmp_path):
    # pytorch#76288: copied from a page, `->` is `-&gt;`, `<0>` is `<0&gt;`, and the ring
    # order is spaced with `&nbsp;`
    def escaped(lines):
        return [x.replace(">", "&gt;").replace("<", "&lt;").replace("    0   1",
                                                                    ":&nbsp; &nbsp; 0&nbsp; &nbsp;1")
                .replace(":" + ":&nbsp;", ":&nbsp;") for x in lines]

    one = [L.info("gpu7", 5100 + r, r, m, tid=5150 + r) for r in range(2) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.1.1.7<0>", "Using network IB",
        "Channel 00/24 :    0   1", f"Channel 00/0 : {r}[{r}] -> {1 - r}[{1 - r}] via P2P/IPC")]
    code, d = check(tmp_path, escaped(one))
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    two = escaped(L.interleave(job(L.ib_rank, nccl="2.12.12"), 3))
    assert any("-&gt;" in x for x in two)
    code, d = check(tmp_path, two)
    assert d["transport"] == "ib" and d["nodes"] == 2 and d["ranks"][0]["net_channels"] > 0
    assert analyse(two).to_dict()["summary"] == d["summary"]


@pytest.mark.parametrize("before", ["", "/var/lib/docker/containers/3f2a/3f2a-json.log:"])
@pytest.mark.parametrize("key", ["log", "message", "textPayload"])
def test_json_log_records(tmp_path, key, before):
    # Docker's json-file log (`{"log":"...\\n","stream":"stdout","time":...}`), log shippers
    # (`message`) and cloud exports (`textPayload`) wrap every line in a JSON string; `grep
    # -H` over the containers' logs puts each record after its file's path (where the plugin
    # names its provider last on its line, the record's tail once went with it: `cxi\\n"`)
    streams = job(L.ofi_cxi_rank, nccl="2.23.4")
    streams[5] = L.socket_rank(L.rank_host(5), 40000 + 17 * 5, 5, 8, iface="hsn0")
    plain = [x.replace(" (found 8 nics)", "") for x in L.interleave(streams, 3)]
    wrapped = [before + json.dumps({key: x + "\n", "stream": "stdout",
                                    "time": "2026-11-23T05:00:00Z"}, separators=(",", ":"))
               for x in plain]
    code, want = check(tmp_path, plain, name="plain.log")
    code2, got = check(tmp_path, wrapped)
    assert want["transport"] == "socket" and want["mixed"] is True
    assert {k: v for k, v in got.items() if k not in ("source", "sources", "ranks")} == {
        k: v for k, v in want.items() if k not in ("source", "sources", "ranks")}
    assert [{**r, "sources": []} for r in got["ranks"]] == [
        {**r, "sources": []} for r in want["ranks"]] and code2 == code
    assert analyse(wrapped).to_dict()["summary"] == got["summary"]  # line by line alike


@pytest.mark.parametrize("before", ["", "/var/lib/docker/containers/3f2a/3f2a-json.log:",
                                    "2024-12-04T05:27:39.074123456Z "])
def test_docker_s_html_safe_escapes_keep_a_failed_init(tmp_path, before):
    # Docker's json-file driver writes `<` and `>` as `\u003c`, `\u003e` (HTML-safe JSON), so
    # each link of an error chain reads `init.cc:1100 -\u003e 2`: the chain pass did not find
    # them, and a job whose init failed read as the network it had chosen (a rank whose
    # chain, not its WARN, says init failed: its channel lines came after the WARN)
    streams = job(L.ib_rank, nodes=2, gpn=2, nccl="2.21.5")
    h, pid = streams[2][0].split(":")[0], 40000 + 17 * 2
    s = [x for x in streams[2] if "Init COMPLETE" not in x]
    at = next(i for i, x in enumerate(s) if "Using network IB" in x) + 1
    chain = [L.info(h, pid, 0, m) for m in ("transport/net_ib.cc:600 -> 2", "init.cc:1100 -> 2",
                                           "group.cc:64 -> 2 [Async thread]")]
    streams[2] = s[:at] + L.warn(h, pid, 0, "Call to ibv_create_cq failed with error Cannot "
                                 "allocate memory", where="misc/ibvwrap.cc:268") + chain + s[at:]
    plain = [x for st in streams for x in st]
    code, want = check(tmp_path, plain, name="plain.log")
    assert (want["transport"], want["attempted"], code) == ("failed", "ib", 1), want["summary"]
    code, d = check(tmp_path, [x for x in plain if x not in chain], name="nochain.log")
    assert d["transport"] != "failed"  # (the chain is what says init failed)
    wrapped = [before + json.dumps({"log": x + "\n", "stream": "stderr",
                                    "time": "2024-12-04T05:27:39.074123456Z"})
               .replace("<", "\\u003c").replace(">", "\\u003e") for x in plain]
    assert any("-\\u003e 2" in x for x in wrapped) and not any("->" in x for x in wrapped)
    code2, got = check(tmp_path, wrapped)
    assert (got["transport"], got["attempted"], code2) == ("failed", "ib", 1), got["summary"]


# --------------------------------------------------------------------------------------------
# Interface names lie


@pytest.mark.parametrize("iface", ["hsn0", "ib0", "ibs85f0"])
def test_socket_over_a_fast_looking_interface_is_socket(tmp_path, iface):
    streams = job(L.socket_rank, iface=iface, env={"NCCL_IB_DISABLE": "1"}, ib_no_device=False)
    code, d = check(tmp_path, L.interleave(streams, 0))
    assert d["transport"] == "socket" and code == 1
    assert all(r["ib_devices"] == [] for r in d["ranks"])


# --------------------------------------------------------------------------------------------
# Streaming, bounds and the two input paths


def _pasted_warns() -> list[str]:
    """WARN-only pastes of this file's shapes, one after the other: a pid redacted or left
    out, the socket helper's WARNs, a plugin's chain, plugin lines without their prefix."""
    lines = ["[2026-03-13 22:26:02] node-a7:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to "
             "ibv_modify_qp failed with 110 Connection timed out",
             "gpusrv [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed",
             "NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v11)",
             "NCCL INFO NET/OFI Selected Provider is efa"]
    lines += L.warn("gpu-r12", 9041, 6, "socketPollConnect: connect to 10.40.3.17<41033> "
                    "returned Connection refused", where="misc/socket.cc:578")
    lines += L.warn("gpu-b17", 41122, 4, "Net : Connection closed by remote peer", where="socket.c:540")
    lines += [L.info("gpu-b17", 41122, 4, m) for m in ("ucx_plugin.c:485 -> 6", "proxy.cc:1297 -> 6")]
    lines += L.warn("b71c", 4410, 0, "Failed to open libibverbs.so[.1]", where="misc/ibvwrap.cu:61")
    lines += ["> Rank  0 Pid  40211 on    WORKPC device  0 [0x21] TITAN RTX",  # quoted
              "> > NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"]
    return lines


def _round_20() -> list[str]:
    """Round 20's shapes one after the other: 2.4.8's own bootstrap line, 2.4's NIC distance
    line, 2.2's bare ring link, a colour code pasted as text, a full /dev/shm, the plugin's
    FI_EFA_FORK_SAFE line."""
    lines = ["NCCL version 2.4.8+cuda10.1"]
    lines += [L.info("gpu-a17", 5359, 0, m) for m in (
        "Bootstrap : Using [0]eth0:10.8.0.17<0>", "NET/Socket : Using [0]eth0:10.8.0.17<0>",
        "CUDA Dev 0[0], Socket NIC distance :  SYS")]
    lines += ["yq01-b34:890:1081 [0] INFO 7 -> 8 via NET/Socket/0",
              "(RayWorkerWrapper pid=194, ip=10.0.1.2) vllm-0-1:194:194 [0] NCCL INFO Using "
              "network Socket\u2190[32m [repeated 7x across cluster]\u2190[0m",
              L.info("lumi-g1", 77, 0, "NET/OFI Setting FI_EFA_FORK_SAFE environment variable to 1")]
    lines += L.warn("c0ffee", 15374, 3, "Error while creating shared memory segment x (size 9)",
                    where="include/shm.h:48")
    lines += [L.info("c0ffee", 15374, 3, c) for c in ("transport/shm.cc:101 -> 2",
                                                      "transport.cc:30 -> 2")]
    return lines


def _round_21() -> list[str]:
    """Round 21's shapes: gIB's lines, a TCPX WARN, nccl-tests' failure line, a GPUDirect
    line alone."""
    lines = [L.info("gke-w-1", 3704, 0, m) for m in (
        "NET/gIB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.52.2.7<0>", "Using network gIB",
        "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/gIB/0(0)/GDRDMA")]
    lines += L.warn("a3-w1", 771, 0, "nic 0, enp12s0, 172.16.0.11<3><-172.16.0.95<4> rx ctrl "
                    "timeout", where="tcpxResult_t tcpxCommProgress(tcpxComm*):1231")
    lines += ["gke-w-1: Test NCCL failure common.cu:345 'unhandled system error'",
              L.info("gke-w-2", 3711, 5, "NET/gIB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"),
              "> > x7:5:5 [0] NCCL INFO NET/IB : No device found. [0] NCCL INFO Using network Socket"]
    # round 22: RCCL's IB-CAST, a pidless prefix's P2P failure, a topology WARN, an echo
    lines += ["mi300-a:11:11 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via "
              "NET/IB-CAST/0/GDRDMA/flush=Always",
              "node [1] /app/rccl/src/transport/p2p.cc:256 NCCL WARN hipIpcGetMemHandle failed",
              "node [1] NCCL INFO /app/rccl/src/transport.cc:182 -> 1",
              *L.warn("elsa", 176, 1, "Attribute busid of node nic not found", where="graph/xml.h:85"),
              "Last error:", "NET/IB : Got completion from peer 11.21.4.12<39138> with error 12"]
    # round 23: NCCL 2.3's device list, a glued launcher prefix, pid:tid without a host
    lines += [L.info("dgx-s12", 4402, 0, "NET/IB: [0] mlx5_64:1/IB "),
              "[0]<stdout>:NCCL version 2.4.7+cuda10.0",
              "78244:78465 [0] NCCL INFO Using network IB", "0119:40126 [3] NCCL INFO Using network IB",
              '{"hits": [{"message": "w9:5:5 [1] NCCL INFO Using network IB\\nw9:5:5 [1] NCCL '
              'INFO Channel 00/0 : 9[1] -> 1[1] [send] via NET/IB/0"}, {"message": "w9:5:5 [1] '
              'NCCL INFO Init COMPLETE"}]}',
              '    "textPayload": "w8:6:6 [0] NCCL INFO Using network Socket\\n",']
    return lines


def _round_24() -> list[str]:
    """Round 24's shapes: a comment quoting a log, aws-ofi-nccl's test-program logger under
    pdsh's address, one process's records glued without newlines, a plugin's init error
    passed up by NCCL's loader."""
    lines = ["#   NET/Plugin: Could not find: libnccl-net.so", "#   Using network Socket",
             "10.3.35.83: INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa",
             "10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2",
             "WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. "
             "RC: -22, ERROR: Invalid argument",
             L.info("p5-316", 1747, 1, "Bootstrap: Using enp71s0:10.200.32.73<0>")
             + L.info("p5-316", 1747, 1, "NCCL version 2.27.3+cuda12.9")]
    lines += [L.info("sg-8", 2070, 1, m) for m in (
        "NET/OFI Selected Provider is verbs;ofi_rxm (found 58 nics)",
        "NET/OFI Invalid type of PCI bus returned 0", "plugin/net.cc:118 -> 2",
        "Assigned NET plugin IB to comm", "Using network IB")]
    return lines


CASES = {
    "pasted-warns": _pasted_warns,
    "legacy-ofi-cloudwatch": lambda: L.cloudwatch(L.interleave(
        [L.ompi_tag(s, r) for r, s in enumerate(job(L.legacy_rank, net="AWS Libfabric"))], 1)),
    "fallback": lambda: L.interleave(job(L.ofi_efa_rank)[:4] + job(L.ofi_fails_then)[4:], 2),
    "failed": lambda: L.interleave(job(L.failing_rank, case="socket-wrong-type"), 3),
    "single": lambda: L.interleave(L.single_host_job(one_process=True), 4),
    "rccl": lambda: L.interleave(L.job(L.rccl_rank, nodes=2, gpn=8, new_banner=True), 5),
    "spliced": lambda: L.cut_merge(L.interleave(job(L.ofi_cxi_rank), 6), 6, rate=0.1),
    "round-20": _round_20,
    "round-21": _round_21,
    "round-24": _round_24,
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("block", [64, 4096, 1 << 20])
def test_line_by_line_and_block_reads_agree(case, block):
    lines = CASES[case]()
    body = L.to_bytes(lines, crlf=case == "fallback", colour=case == "failed")
    a = LogAnalyser(source="x")
    for line in body.splitlines(keepends=True):
        a.feed(line)
    b = LogAnalyser(source="x")
    stats = b.feed_stream(io.BytesIO(body), block_bytes=block)
    assert stats.text and not stats.binary and stats.bytes_read == len(body)
    assert a.result().to_dict() == b.result().to_dict()


def _by_lines_and_by_blocks(body: bytes, block: int) -> tuple[LogAnalyser, LogAnalyser]:
    a = LogAnalyser(source="x")
    for line in io.BytesIO(body):  # lines end at LF only
        a.feed(line)
    b = LogAnalyser(source="x")
    stats = b.feed_stream(io.BytesIO(body), block_bytes=block)
    assert stats.bytes_read == len(body) and stats.lines == a._lines
    return a, b


def _events(a: LogAnalyser) -> list[tuple[int, ...]]:
    """What a verdict is made of, beyond what --json shows: every process's line and channel
    counts and the line numbers that order a choice and a failure."""
    return [(p.lines, p.net_channels, p.sel_seq, p.chan_seq, p.err_seq, p.complete_seq,
             p.top_seq, p.fatal_seq, p.weak_seq, p.provider_seq) for p in a._procs.values()]


def _same_answer(a: LogAnalyser, b: LogAnalyser) -> None:
    assert a.result().to_dict() == b.result().to_dict()
    assert _events(a) == _events(b)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("block", [4096, 1 << 20])
def test_a_log_made_of_copies_reads_like_line_by_line(case, block):
    # a big log is often one job's log many times over (a benchmark, a concatenation):
    # block reads count copies after reading two, and must answer as reading every line
    one = L.to_bytes(CASES[case]())
    body = one * 40
    a, b = _by_lines_and_by_blocks(body, block)
    _same_answer(a, b)
    if block == 1 << 20:  # the copies fit in a block: most of them were counted, not read
        assert b.repeated_bytes > len(body) // 2


def test_copies_are_read_in_growing_blocks(monkeypatch):
    # each scan block reads its first two copies before it counts the rest: while the text
    # is copies, the blocks double (to MAX_SCAN_BLOCKS); other text keeps SCAN_BLOCKS
    import runner.nccl_log as N

    sizes: list[int] = []
    real = LogAnalyser._text_block

    def spy(self, data, src, stats, lo=0, hi=None):
        sizes.append((len(data) if hi is None else hi) - lo)
        return real(self, data, src, stats, lo, hi)

    monkeypatch.setattr(LogAnalyser, "_text_block", spy)
    block = 16384
    one = L.to_bytes(L.interleave(job(L.failing_rank, nodes=2, gpn=1, case="socket-wrong-type"), 0))
    body = one * (N.MAX_SCAN_BLOCKS * 8 * block // len(one))
    a, b = _by_lines_and_by_blocks(body, block)
    _same_answer(a, b)
    big = [n for n in sizes if n > 2 * block]
    assert big[0] < (N.SCAN_BLOCKS + 1) * block < big[1] < big[2]  # growing ...
    assert max(big) > (N.MAX_SCAN_BLOCKS - 1) * block  # ... up to the bound
    assert max(big) < (N.MAX_SCAN_BLOCKS + 1) * block
    sizes.clear()  # not copies (every copy another host): the blocks stay small
    other = b"".join(one.replace(b"nid", b"h%03d" % i) for i in range(len(body) // len(one)))
    a, b = _by_lines_and_by_blocks(other, block)
    _same_answer(a, b)
    assert max(sizes) < (N.SCAN_BLOCKS + 1) * block


REPEATED_LINES = {
    "using": "nid000001:7:7 [0] NCCL INFO Using network IB",
    "channel": "nid000001:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via NET/IB/0/GDRDMA",
    "warn": "nid000001:7:7 [0] misc/ibvwrap.cc:123 NCCL WARN Call to ibv_create_qp failed",
    "chain": "nid000001:7:7 [0] NCCL INFO transport/net_ib.cc:921 -> 2",
    "env": "nid000001:7:7 [0] NCCL INFO NCCL_PROTO set by environment to ^LL128",
    "libfabric": "libfabric:77:1700000000::cxi:core:cxip_ep_enable():123<warn> nid000001: x",
    "ibverbs": "libibverbs: Warning: no userspace device-specific driver found for /sys/x",
    "setting": "+ export FI_PROVIDER=cxi NCCL_NET='AWS Libfabric'",
    "bare": "[1,0]<stdout>:NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
}


@pytest.mark.parametrize("name", sorted(REPEATED_LINES))
def test_one_line_written_over_and_over_counts_every_time(name):
    # a stuck loop or a generated log repeats one line: it is counted in bulk, and the
    # counts and the order of events are those of reading every line
    head = L.to_bytes(L.interleave(job(L.ib_rank, nodes=2, gpn=1), 0))
    line = REPEATED_LINES[name].encode() + b"\n"
    body = head + line * 20000 + head + line * 3
    a, b = _by_lines_and_by_blocks(body, 1 << 20)
    _same_answer(a, b)
    assert b.repeated_bytes > len(line) * 10000


def test_text_that_almost_repeats_is_read():
    # copies that differ in one line (the last copy fails), lines that repeat at a regular
    # distance with different text between them, and copies that alternate a setting:
    # each copy that is not a pure repeat must be read, and the answer stays exact
    one = L.interleave(job(L.ib_rank, nodes=2, gpn=2), 0)
    bad = list(one)
    bad[len(bad) // 2] = bad[len(bad) // 2].replace("Using network IB", "Using network Socket")
    every = []
    for i in range(3000):
        every += [one[0], f"[rank0]: step {i} loss {1 / (i + 1):.5f}"]
    flip = []
    for i in range(200):
        flip += one[:3] + [L.info("nid000000", 40000, 0, L.env_echo("NCCL_ALGO", "Ring" if i % 2
                                                                    else "Tree"))]
    for lines in (one * 30 + bad + one * 5, every, flip):
        body = L.to_bytes(lines)
        for block in (4096, 1 << 20):
            a, b = _by_lines_and_by_blocks(body, block)
            _same_answer(a, b)


@pytest.mark.parametrize("seed", range(24))
def test_copies_of_random_pieces_read_like_line_by_line(seed):
    # logs glued from pieces of the test logs, each piece copied 1 to 300 times, some cut
    # mid-way: copies start and end anywhere relative to blocks and windows
    import random

    rnd = random.Random(seed)
    pieces = [L.to_bytes(CASES[c]()) for c in sorted(CASES)]
    pieces += [(line + "\n").encode() for line in REPEATED_LINES.values()]
    pieces.append(L.to_bytes(L.interleave(job(L.failing_rank, case="socket-wrong-type"), 3)))
    body = b""
    while len(body) < rnd.choice([20000, 300000]):
        piece = rnd.choice(pieces)
        if rnd.random() < 0.3:
            lines = piece.splitlines(keepends=True)
            i = rnd.randrange(len(lines))
            piece = b"".join(lines[i:rnd.randrange(i, len(lines) + 1)])
        body += piece * rnd.choice([1, 1, 2, 3, 5, 50, 300])
    for block in (rnd.choice([64, 4096, 65536]), 1 << 20):
        _same_answer(*_by_lines_and_by_blocks(body, block))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive quantifiers: Python 3.11")
def test_possessive_outer_prefix_accepts_the_same_lines():
    # Python >= 3.11 scans for stripped lines with possessive quantifiers (no backtracking):
    # the lines it finds must be exactly those the plain pattern (Python 3.10) finds
    import re

    import runner.nccl_log as N

    plain = re.compile(r"%s(?:%s)" % (N._OUTER_HEAD_PLAIN, N._MSG_HEADS))
    fast = re.compile(r"%s(?:%s)" % (N._OUTER_HEAD, N._MSG_HEADS))
    assert plain.pattern != fast.pattern
    heads = ["NET/IB : Using [0]mlx5_0:1/IB", "Using network IB", "comm 0x1 rank 0 nranks 2",
             "NCCL version 2.21.5", "rank 3 nranks 8", "NCCL_PROTO set by environment to x",
             "epoch 3 step 10", "", "nid01:1:1 [0] NCCL INFO Using network IB"]
    outers = ["", "[1,0]<stdout>:", "[1,0]<stdout>: ", "[rank0]:", "[rank0]: ", "[x] ", "[]",
              "12: ", "12:", "1234567: ", "    3: ", "     3: ", " | 2024-01-02T03:04:05.678Z | ",
              "  | x |", "2024-01-02T03:04:05.678+01:00 ", "2024-01-02 03:04:05,678 ",
              "2024-01-02T03:04:05.6789012345678Z ", "[" + "a" * 80 + "] ", "[" + "a" * 81 + "] ",
              "| " + "b" * 41 + "| ", "[a]:[b]: 3: ", "[a] [b] [c] [d] ", "[a]<stderr>:<stdout>:"]
    lines = [o1 + o2 + h for o1 in outers for o2 in ("", "[r] ", "7: ", " | y | ") for h in heads]
    lines += [line for make in CASES.values() for line in make()]  # every shape of test log
    assert len(lines) > 1000
    for line in lines:
        assert bool(plain.match(line)) == bool(fast.match(line)), line


def _channel_run_log() -> bytes:
    """Two ranks whose channel lines come in long runs (one process after the other, as one
    file per rank or a big job's init prints them). Each run holds one line that must not
    be counted with the run: GDRDMA appearing mid-run, a first ` via NET/` to another
    network, a spliced second `NCCL INFO`, a libfabric line, a KEY=value setting, a CR, an
    over-long line, a cut index, a two-space level, another thread, a Ring line, a tab,
    non-ASCII text."""
    streams = job(L.ib_rank, nodes=2, gpn=1, gdr=False)
    out = []
    for rank, stream in enumerate(streams):
        host, pid = L.rank_host(rank, gpn=1), 40000 + 17 * rank  # as L.job names them
        p = f"{host}:{pid}:{pid + 7} [0] NCCL INFO "

        def ch(i: int, tail: str = "", net: str = "IB", mid: str = " ") -> str:
            return (f"{p}Channel {i:02d}/0 : {rank}[0] -> {1 - rank}[0] [send]{mid}"
                    f"via NET/{net}/0{tail}")

        odd = [ch(0, "/GDRDMA"), ch(1, " via NET/IB/0", net="Socket"), ch(2, " NCCL INFO y"),
               ch(3, " libfabric:1:2:cxi:core:fn():1<warn> x"), ch(4, " NCCL_PROTO=^LL128"),
               ch(5, mid=" \r "), ch(6, mid=" " + "y" * 17000 + " "), ch(7).replace("/0", "/x"),
               ch(8).replace("INFO ", "INFO  "), ch(9).replace(f":{pid + 7} ", f":{pid + 9} "),
               ch(10).replace("Channel 10/0", "Ring 10"), ch(11, "\tx"), ch(12, " \u00e9")]
        out += stream
        for line in odd:  # runs split by a line of the same process that is no channel line
            out += [ch(i) for i in range(20)] + [line] + [ch(i) for i in range(20, 40)]
            out.append(f"{p}Connected all rings")
    return L.to_bytes(out)


@pytest.mark.parametrize("block", [64, 4096, 1 << 20])
def test_channel_runs_count_like_single_lines(block):
    # block reads take a run of a process's channel lines in one step: every line must
    # count exactly as line-by-line reading counts it
    body = _channel_run_log()
    a = LogAnalyser(source="x")
    for line in io.BytesIO(body):  # lines end at LF only (a CR inside one stays)
        a.feed(line)
    b = LogAnalyser(source="x")
    b.feed_stream(io.BytesIO(body), block_bytes=block)
    va, vb = a.result(), b.result()
    da, db = va.to_dict(), vb.to_dict()
    # nccl_lines: feed() cuts an over-long line before looking for a trigger, a block read
    # after finding one (past the cut here), so it counts that line as an NCCL line; both
    # take nothing from it
    assert da.pop("nccl_lines") + 2 == db.pop("nccl_lines")
    assert da == db
    assert [r.net_channels for r in vb.ranks] == [r.net_channels for r in va.ranks]
    assert all(r.gdrdma and r.net_channels > 500 for r in vb.ranks)
    assert vb.ll128_guard == "NCCL_PROTO=^LL128 (log)"  # from a line inside a run


def test_rank_json_is_what_json_dumps_writes():
    # --json encodes ranks itself (shared fields once): byte for byte json.dumps' text,
    # also for text that JSON escapes (host names, a WARN's quotes and backslashes), and in
    # both the indented and compact forms
    hosts = ["nid", "n\u00e9ud", "node\u2603", "plain"]
    lines = []
    for i in range(300):  # more than JSON_RANK_LINES: the compact rank list
        host = f"{hosts[i % len(hosts)]}{i}"
        lines.append(f"{host}:{i + 1}:{i + 1} [{i % 4}] NCCL INFO NET/OFI Selected Provider is "
                     f"{'cxi' if i % 7 else 'tcp'} (found {i % 3 + 1} nics)")
        lines.append(f"{host}:{i + 1}:{i + 1} [{i % 4}] NCCL INFO comm 0x1 rank {i} nranks 300 "
                     f"cudaDev {i % 4} busId 1000 - Init COMPLETE")
        if i % 5 == 0:
            lines.append(f"{host}:{i + 1}:{i + 1} [{i % 4}] net.cc:1 NCCL WARN NET/OFI Request "
                         f"completed with error \"cxi\\{i}\"")
    for n in (300, 20):
        v = analyse(lines[:int(2.2 * n)])
        assert v.to_json(indent=None) == json.dumps(v.to_dict())
        assert json.loads(v.to_json()) == v.to_dict()
    assert '\\"cxi\\\\0\\"' in v.to_json() and "\\u00e9" in v.to_json()


def test_over_long_line_is_cut_and_reading_goes_on():
    body = b"x" * (3 << 20) + b"\n" + L.to_bytes(L.interleave(job(L.ib_rank), 0))
    a = LogAnalyser()
    stats = a.feed_stream(io.BytesIO(body), block_bytes=1 << 16)
    v = a.result()
    assert v.transport is Transport.IB and len(v.ranks) == 8 and not stats.binary


@pytest.mark.parametrize("shift", range(-2, 3))
def test_the_line_after_a_progress_bar_is_read_when_a_block_splits_its_crlf(shift):
    # An over-long line (a progress bar) is skipped but for its piece after its last CR;
    # where a block ends between that piece's CR and LF (shift 0), the CR is a CRLF's, not a
    # redraw after the piece: the line (the job's only NCCL version line) must still be read.
    # (tqdm draws its bar in U+2588 blocks: each block of such text is read alone, so blocks
    # end every 64 KiB.)
    block = 1 << 16
    rank = [x for x in L.interleave(job(L.ib_rank, nodes=2, gpn=1), 0)]
    k = next(i for i, x in enumerate(rank) if "NCCL version" in x)
    bar = _progress_bar(3000).replace("#", "\u2588").encode()
    head = L.to_bytes(rank[:k], crlf=True)
    pad = -(len(head) + len(bar) + 1 + len(rank[k]) + 1) % block + shift
    body = (head + b"x" * pad + bar + b"\r" + rank[k].encode() + b"\r\n"
            + L.to_bytes(rank[k + 1:], crlf=True))
    a = LogAnalyser()
    a.feed_stream(io.BytesIO(body), block_bytes=block)
    want = analyse([x + "\r\n" for x in rank]).to_dict()
    got = a.result().to_dict()
    assert (got["ranks"], got["nccl_version"]) == (want["ranks"], "2.21.5")


def test_binary_stream_stops_with_a_warning_after_text():
    text = L.to_bytes(L.interleave(job(L.ib_rank), 0))
    a = LogAnalyser()
    stats = a.feed_stream(io.BytesIO(text + b"\0" * (8 << 20)))
    assert stats.binary and stats.text and stats.bytes_read < len(text) + (8 << 20)
    v = a.result()
    assert v.transport is Transport.IB and "binary-input" in v.warning_codes


def test_dev_zero_returns_exit_2(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "runner.check_log_cmd", "/dev/zero"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "binary data, not a text log" in proc.stderr


def test_many_single_rank_hosts_sharing_one_pid():
    # containers give every host the same pid: the cut-host repair must not pair them up
    n = 4096
    lines = [f"nid{i:06d}:42:42 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 8 nics)"
             for i in range(n)]
    lines += [f"nid{i:06d}:42:49 [0] NCCL INFO Channel 00/0 : {i}[0] -> {(i + 1) % n}[0] [send] "
              "via NET/AWS Libfabric/0/GDRDMA" for i in range(n)]
    v = analyse(lines)
    assert len(v.ranks) == n and v.transport is Transport.OFI and v.provider == "cxi"
    assert v.verdict is Verdict.FAST and v.nodes == n


def test_hosts_of_several_name_lengths_sharing_one_pid():
    # `gpu7` ... `gpu4095` (no zero padding: names of four lengths) in containers, all pid 42,
    # and two tails of lines that a splice cut (`u7`, `pu12`): the tails are folded into
    # their hosts, and no host into another (`gpu12` is not a cut `gpu112`). The repair
    # relates such names through a suffix index; it once listed every process of the pid
    # for each one (5.8 s for 16,384 such hosts; benchmarks/check_log_scaling.py measures it)
    n = 4096
    lines = []
    for i in range(n):
        p = f"gpu{i}:42:42 [0] NCCL INFO "
        lines += [f"{p}Bootstrap : Using hsn0:10.0.{i // 250}.{i % 250}<0>",
                  f"{p}NET/OFI Selected Provider is cxi (found 8 nics)",
                  f"{p}Using network AWS Libfabric"]
    lines += ["u7:42:42 [0] NCCL INFO Channel 00/0 : 7[0] -> 8[0] [send] via NET/AWS Libfabric/0",
              "pu12:42:42 [0] NCCL INFO Connected all rings"]
    v = analyse(lines)
    assert len(v.ranks) == n and {r.transport for r in v.ranks} == {Transport.OFI}
    assert sorted(r.host for r in v.ranks) == sorted(f"gpu{i}" for i in range(n))
    assert v.nodes == n and v.provider == "cxi"


CLOCKS = {  # each line's own time, as kubectl/Docker --timestamps, a logger, CloudWatch write it
    "kubectl": lambda n: f"2024-12-04T05:27:{n // 1000 % 60:02d}.{n * 7919 % 10 ** 9:09d}Z ",
    "trimmed": lambda n: f"2024-12-04T05:27:{n // 1000 % 60:02d}.{n * 7919 % 10 ** 5}Z ",
    "logger": lambda n: f"[2024-12-04 05:27:{n // 1000 % 60:02d}.{n % 1000:03d}] ",
    "python": lambda n: f"2024-12-04 05:27:{n // 1000 % 60:02d},{n % 1000:03d} ",
    "cloudwatch": lambda n: f"  | 2024-12-04T05:27:{n // 1000 % 60:02d}.{n % 1000:03d}Z | ",
}


def _clocked(lines: list[str], clock) -> list[str]:
    return [clock(n) + x for n, x in enumerate(lines)]


@pytest.mark.parametrize("clock", sorted(CLOCKS))
@pytest.mark.parametrize("order", ["blocks", "interleaved"])
def test_a_clock_on_every_line_reads_as_the_lines_without_it(clock, order):
    # Each line's clock differs, so the prefix cache is keyed on NCCL's prefix after it: the
    # answer is the one the same lines give without clocks, rank for rank, with channel runs
    # of one process (blocks) and without (interleaved); with Open MPI's tag after the
    # clock, the tag still names the rank. And reading stays a cache hit: the cache holds
    # one key per process, not one per line.
    for fn, tag in ((L.ofi_cxi_rank, False), (L.ib_rank, True), (L.ofi_fails_then, False),
                    (L.socket_rank, True)):
        streams = job(fn)
        if tag:
            streams = [L.ompi_tag(s, r) for r, s in enumerate(streams)]
        plain = [x for s in streams for x in s] if order == "blocks" else L.interleave(streams, 3)
        a, b = LogAnalyser(), LogAnalyser()
        a.feed_stream(io.BytesIO(L.to_bytes(_clocked(plain, CLOCKS[clock]))))
        b.feed_stream(io.BytesIO(L.to_bytes(plain)))
        assert a.result().to_dict() == b.result().to_dict(), (fn.__name__, tag)
        assert a._n_prefixes == b._n_prefixes < len(plain) // 4, (a._n_prefixes, b._n_prefixes)


def test_clocked_channel_runs_are_taken_whole_and_end_where_the_process_changes():
    # a rank's 64 network channel lines under kubectl's clocks (one of them 3 digits
    # shorter, as RFC 3339 drops trailing zeros) are counted as one run; another rank's
    # line in the middle ends it, and a channel over another network is read alone
    p = "nid000001:40:40 [0] NCCL INFO "
    q = "nid000002:50:50 [0] NCCL INFO "
    lines = [f"{p}NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>", f"{p}Using network IB",
             f"{q}NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.2<0>", f"{q}Using network IB"]
    for ch in range(32):
        lines += [f"{p}Channel {ch:02d}/0 : 1[0] -> 0[0] [receive] via NET/IB/0",
                  f"{p}Channel {ch:02d}/0 : 0[0] -> 1[0] [send] via NET/IB/0"]
    lines.insert(40, f"{q}Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0")
    lines.insert(50, f"{p}Channel 07/0 : 0[0] -> 1[0] [send] via NET/Socket/0")
    clocked = [f"2024-12-04T05:27:39.{'074' if n == 20 else '074123456'}Z {x}"
               for n, x in enumerate(lines)]
    a = LogAnalyser()
    a.feed_stream(io.BytesIO(L.to_bytes(clocked)))
    got = a.result().to_dict()
    assert got == analyse(lines).to_dict()
    assert got["mixed"] and [r["transport"] for r in got["ranks"]] == ["socket", "ib"]
    assert a._nccl_lines == len(lines)


def _progress_bar(redraws: int) -> str:
    """What tqdm writes for an epoch: each redraw after a CR, no newline until it ends."""
    return "".join(f"\rEpoch 3: {j * 100 // redraws:3d}%|{'#' * (j * 20 // redraws):20}| "
                   f"{j}/{redraws} [01:{j % 60:02d}<02:10, 9.51it/s, loss=2.{j % 97:02d}]"
                   for j in range(redraws))


@pytest.mark.parametrize("redraws", [100, 3000, 30000])  # 8 kB, 0.25 MB, 2.5 MB of bar
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_line_printed_after_a_long_progress_bar_is_read(tmp_path, redraws, eol):
    # A line the job printed while a progress bar ran (NCCL's INFO lines have no newline
    # before them, unlike its WARN; a lazily connected channel's lines print at the first
    # collective, mid-epoch) ends a "line" that the bar made 0.25 or 2.5 MB long: longer
    # than a line is kept, and than a block check-log reads at a time. It is the last piece
    # a terminal shows, and it is read as if the bar were not there: by check-log, and by
    # the epilogue of a failed step, which reads line by line
    from runner.check_log_cmd import check_files

    lines = [x for s in job(L.socket_rank, nodes=2, gpn=1) for x in s]
    plain = L.write_log(tmp_path / "plain.log", lines)
    want = check_files([str(plain)])
    k = max(i for i, x in enumerate(lines) if "via NET/Socket" in x)  # rank 1's last channel
    glued = tmp_path / "glued.log"
    glued.write_bytes(eol.join(lines[:k] + [_progress_bar(redraws) + "\r" + lines[k]]
                               + lines[k + 1:]).encode() + eol.encode())
    got = check_files([str(glued)])
    assert [r.to_dict() | {"sources": None} for r in got.ranks] == \
        [r.to_dict() | {"sources": None} for r in want.ranks]
    assert got.summary == want.summary and got.warning_codes == want.warning_codes
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for path in (plain, glued):
        proc = subprocess.run([sys.executable, "-c", "from runner.cli import main; main()",
                               "job-end", "--status", "1", str(path)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert want.summary in proc.stdout.splitlines(), proc.stdout + proc.stderr


def test_cut_hosts_still_repaired_at_scale():
    n = 512
    lines = []
    for i in range(n):
        lines += [f"nid{i:06d}:42:42 [0] NCCL INFO Bootstrap : Using hsn0:10.0.{i // 250}.{i % 250}<0>",
                  f"nid{i:06d}:42:42 [0] NCCL INFO Using network AWS Libfabric",
                  f"nid{i:06d}:42:42 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 8 nics)"]
    lines.append("xxx Using netnid000007:42:42 [0] NCCL INFO Using network AWS Libfabric")
    lines.append("07:42:42 [0] NCCL INFO Using network AWS Libfabric")  # tail of a cut line
    v = analyse(lines)
    assert len(v.ranks) == n and {r.transport for r in v.ranks} == {Transport.OFI}


# --------------------------------------------------------------------------------------------
# The job epilogue prints the same verdict line


def test_job_end_prints_the_check_log_summary(tmp_path):
    streams = job(L.ofi_fails_then)
    path = L.write_log(tmp_path / "job-5.log", [L.outer_prefix([x], "srun", rank=0)[0]
                                                for x in L.interleave(streams, 3)])
    from runner.check_log_cmd import check_files

    want = check_files([str(path)], "slingshot").summary
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", "from runner.cli import main; main()", "job-end",
                           "--status", "0", "--fabric", "slingshot", str(path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == [want]
    assert want.startswith("fabrikit: WARNING transport Socket/eth0 on 8/8 ranks")


def _olivia_log(tmp_path: Path) -> Path:
    """A healthy Olivia run as its script writes it: NCCL 2.27 over OFI/cxi, `srun --label`
    prefixes, and no `NCCL_PROTO set by environment` line (NCCL prints it only under
    NCCL_DEBUG_SUBSYS=ENV; the scripts set INIT,NET)."""
    streams = job(L.ofi_cxi_rank, nccl="2.27.3")
    lines = [x for r, s in enumerate(streams) for x in L.outer_prefix(s, "srun", rank=r)]
    assert not any("NCCL_PROTO" in x for x in lines)
    return L.write_log(tmp_path / "job-9.log", lines)


@pytest.mark.parametrize("runtime_prefix", ["APPTAINERENV_", "SINGULARITYENV_", ""])
def test_job_end_knows_the_ll128_guard_its_script_set(tmp_path, runtime_prefix):
    # The real Olivia script: its own exports, then its own job-end line, run by bash.
    from runner.check_log_cmd import check_files

    log = _olivia_log(tmp_path)
    script = subprocess.run(
        [sys.executable, "-c", "from runner.cli import main; main()", "run-multinode", "--site",
         "olivia", "--nodes", "2", "--dry-run"], cwd=REPO, capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120).stdout
    exports = [x.replace("APPTAINERENV_", runtime_prefix, 1) for x in script.splitlines()
               if x.startswith("export APPTAINERENV_")]
    assert "export APPTAINERENV_NCCL_PROTO='^LL128'" in script and exports
    end = next(x for x in script.splitlines() if x.strip().startswith("fabrikit job-end"))
    assert "--fabric slingshot" in end
    env = {k: v for k, v in os.environ.items() if "NCCL_" not in k and "FI_CXI" not in k}
    env["PYTHONPATH"] = str(REPO)
    fabrikit = f"{sys.executable} -c 'from runner.cli import main; main()'"
    tail = f'{fabrikit} job-end --status 0 --fabric slingshot --check-transport "{log}"'
    guarded = subprocess.run(["bash", "-c", "\n".join(exports + [tail])], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    want = check_files([str(log)], "slingshot", {"NCCL_PROTO": "^LL128"}).summary
    assert guarded.returncode == 0 and guarded.stdout.strip() == want, guarded.stderr
    assert want.startswith("fabrikit: transport OFI/cxi on 8/8 ranks") and "LL128" not in want
    # without the script's exports the same log is the GH200 hazard
    bare = subprocess.run(["bash", "-c", tail], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert "without NCCL_PROTO=^LL128" in bare.stdout, bare.stdout + bare.stderr


def test_check_log_inherit_env_reads_the_runtime_prefix(tmp_path, monkeypatch):
    log = _olivia_log(tmp_path)
    for k in ("NCCL_PROTO", "APPTAINERENV_NCCL_PROTO", "SINGULARITYENV_NCCL_PROTO"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("APPTAINERENV_NCCL_PROTO", "^LL128")
    monkeypatch.setenv("NCCL_PROTO", "LL128")  # the host's own value: the container's wins
    res = CliRunner().invoke(check_log, [str(log), "--json", "--fabric", "slingshot",
                                         "--inherit-env"])
    d = json.loads(res.output)
    assert d["ll128_guard"] == "NCCL_PROTO=^LL128 (job environment)", d["summary"]
    assert "ll128-hazard" not in [w["code"] for w in d["warnings"]]


def test_sagemaker_mpi_tags_on_stripped_lines(tmp_path):
    lines = []
    for r, s in enumerate(job(L.ofi_efa_rank, nccl="2.23.4")):
        lines += [f"[1,mpirank:{r},algo-{r // 4 + 1}]<stdout>:{x}"
                  for x in L.strip_prefix(s, keep_level=False)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ofi" and d["provider"] == "efa"
    assert [r["rank"] for r in d["ranks"]] == list(range(8))


OLD_KEYS = ("source", "sources", "fabric", "expected_fabric", "fabric_inferred_from", "transport",
            "provider", "ofi_fabric", "nccl_version", "plugin", "plugin_api", "plugin_version",
            "libfabric_version", "nodes", "world_size", "transport_counts", "ll128_guard", "ranks",
            "warnings", "verdict", "exit_code", "summary", "lines", "nccl_lines")
OLD_RANK_KEYS = ("rank", "nranks", "host", "pid", "cuda_dev", "transport", "label", "network",
                 "provider", "ofi_fabric", "nics", "ib_devices", "socket_ifaces", "net_channels",
                 "gdrdma", "nccl_version", "plugin", "plugin_api", "plugin_version",
                 "libfabric_version", "plugin_missing", "ib_no_device", "failure",
                 "nccl_warnings", "sources")


@pytest.mark.parametrize("nodes", [2, 80])  # 320 ranks: the compact rank list
def test_json_keeps_its_keys_and_adds_new_ones(tmp_path, nodes):
    code, d = check(tmp_path, L.interleave(job(L.ofi_cxi_rank, nodes=nodes), 0))
    assert list(d)[:len(OLD_KEYS)] == list(OLD_KEYS)
    assert {"selected", "attempted", "mixed", "inter_node", "library", "provider_stack"} <= set(d)
    for r in d["ranks"]:
        assert list(r)[:len(OLD_RANK_KEYS)] == list(OLD_RANK_KEYS)
        assert {"selected", "attempted", "inter_node", "provider_stack", "plugin_failed",
                "library"} <= set(r)
    v = analyse(L.interleave(job(L.ofi_cxi_rank, nodes=nodes), 0))
    assert json.loads(v.to_json()) == json.loads(v.to_json(indent=None)) == v.to_dict()


def test_job_end_failed_step_prints_verdict_then_cause(tmp_path):
    streams = job(L.failing_rank, case="ib-create-cq")
    lines = [L.outer_prefix([x], "srun", rank=0)[0] for x in L.interleave(streams, 3)]
    lines.append("srun: error: nid001001: task 1: Exited with exit code 1")
    path = L.write_log(tmp_path / "job-6.log", lines)
    from runner.check_log_cmd import check_files

    want = check_files([str(path)], "infiniband").summary
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", "from runner.cli import main; main()", "job-end",
                           "--status", "1", "--fabric", "infiniband", str(path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout.strip().splitlines()
    assert proc.returncode == 1 and out[0] == want and len(out) == 2, proc.stdout + proc.stderr
    assert want.startswith("fabrikit: ERROR NCCL network init failed on 8/8 ranks")
    assert out[1].startswith("fabrikit: FAILED: task 1 on node nid001001 failed first")


# --------------------------------------------------------------------------------------------
# Round 24 (six helpers, 145 real logs: aws-ofi-nccl/EFA, RCCL, Slingshot sites, IB/RoCE,
# NCCL 2.2-2.7, logs kept in unusual places)

def test_a_comment_quoting_the_log_is_read(tmp_path):
    # NCSA Delta's job script notes what its runs printed, as comments
    code, d = check(tmp_path, ["# what NCCL says when the plugin is missing:",
                               "#   NET/Plugin: Could not find: libnccl-net.so",
                               "#   NET/IB : No device found.", "#   Using network Socket"])
    assert d["transport"] == "socket"
    code, d = check(tmp_path, ["#   NET/Plugin: Loaded net plugin Libfabric (v11)",
                               "#   NET/OFI Selected provider is cxi, fabric is cxi (found 1 nics)",
                               '#   Using network Libfabric      <-- NOT "Using network Socket"'])
    assert (d["transport"], d["provider"]) == ("ofi", "cxi")
    # nccl-tests' own `#` lines are no NCCL line
    code, d = check(tmp_path, ["# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor)",
                               "#  Rank  0 Group  0 Pid  11 on gpu-a07 device  0 [0x07] A100",
                               "# Using devices", L.info("gpu-a07", 11, 0, "Using network IB")])
    assert [(r["host"], r["selected"]) for r in d["ranks"]] == [("gpu-a07", "ib")]
    assert d["transport"] == "none"  # its one rank, on one host (the rank table says so)


def test_nccl_2_4_without_its_version_line_is_told_by_the_order_of_its_lines(tmp_path):
    # nccl-tests#29: every rank's bootstrap NET/Socket line comes before its NET/IB line; a
    # rank the paste cut after its NET/Socket line chose nothing yet
    streams = job(L.legacy_rank, nccl="2.4.8", net="IB", version_line=False)
    streams[5] = streams[5][:1]  # `NET/Socket : Using [0]ib0:...` only
    code, d = check(tmp_path, L.interleave(streams, 2), "--fabric", "infiniband")
    assert (d["transport"], d["mixed"], d["nccl_version"]) == ("ib", False, None)
    assert "socket" not in d["transport_counts"]
    # from 2.5 on a NET/Socket line means sockets: the same paste without IB lines is socket
    socket_only = [[x for x in s if "NET/IB" not in x] for s in streams]
    code, d = check(tmp_path, L.interleave(socket_only, 2), "--fabric", "infiniband")
    assert d["transport"] == "socket"


def test_a_plugin_init_error_passed_up_by_the_loader_is_a_fallback(tmp_path):
    # aws-ofi-nccl 1.6 with verbs;ofi_rxm on a RoCE box: `Invalid type of PCI bus`, then
    # NCCL's loader `plugin/net.cc:118 -> 2`, then NCCL's own IB (a committed sglang log)
    lines = []
    for r, host in enumerate(("aihub-8", "aihub-9")):
        lines += [L.info(host, 2070 + r, 0, m) for m in (
            "NET/Plugin: Loaded net plugin AWS Libfabric (v6)", "NET/OFI Using aws-ofi-nccl 1.6.0",
            "NET/OFI Selected Provider is verbs;ofi_rxm (found 58 nics)",
            "Initialized NET plugin AWS Libfabric", "NET/OFI Invalid type of PCI bus returned 0",
            "plugin/net.cc:118 -> 2", "Initialized NET plugin IB", "Assigned NET plugin IB to comm",
            "Using network IB", f"comm 0x1 rank {r} nRanks 2 nNodes 2 localRanks 1 localRank 0",
            f"Channel 00/0 : {1 - r}[0] -> {r}[0] [receive] via NET/IB/0/GDRDMA",
            "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE")]
    code, d = check(tmp_path, lines, "--fabric", "infiniband")
    assert (code, d["transport"], d["verdict"]) == (0, "ib", "fast")
    assert all(r["plugin_failed"] and "plugin/net.cc:118 -> 2" in r["plugin_failed"]
               for r in d["ranks"])
    assert "plugin-failed" in [w["code"] for w in d["warnings"]]
    # a chain through the loader after the plugin's choice, once init completed, is no
    # fallback of init (and a chain with no provider chosen before it is none either)
    code, d = check(tmp_path, [L.info("n1", 5, 0, "plugin/net.cc:118 -> 2"),
                               L.info("n1", 5, 0, "Using network IB")])
    assert d["ranks"][0]["plugin_failed"] is None


def test_one_process_records_glued_without_newlines(tmp_path):
    # aws-ofi-nccl#990: a paste lost the newline between pairs of one process's lines
    h = "h100-st-p548xlarge-316"
    a = L.info(h, 1747401, 1, "Bootstrap: Using enp71s0:10.200.32.73<0>")
    b = L.info(h, 1747401, 1, "NCCL version 2.27.3+cuda12.9")
    c = L.info(h, 1747401, 1, "NET/OFI Selected Provider is efa (found 32 nics)")
    e = L.info(h, 1747401, 1, "Using network Libfabric")
    code, d = check(tmp_path, [a + b, c + e])
    assert [(r["host"], r["pid"]) for r in d["ranks"]] == [(h, 1747401)]
    assert (d["transport"], d["provider"], d["nccl_version"]) == ("ofi", "efa", "2.27.3")


def test_aws_ofi_nccl_test_programs_are_read(tmp_path):
    # aws-ofi-nccl#22: nccl_message_transfer on two hosts, its own logger, no pid
    lines = []
    for r, host in enumerate(("ip-172-0-1-23", "ip-172-0-1-161")):
        lines += ["INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa",
                  f"INFO: Function: main Line: 49: NET/OFI Process rank {r} started. NCCLNet "
                  f"device used on {host} is AWS Libfabric.",
                  "INFO: Function: main Line: 53: NET/OFI Received 1 network devices"]
    lines += ["WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. "
              "RC: -22, ERROR: Invalid argument"] * 2
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"], d["attempted"]) == ("failed", "efa", "ofi")
    # aws-ofi-nccl#67: the same program under pdsh, no provider found
    lines = ["10.3.35.83: + mpirun -n 16 -N 8 -x FI_PROVIDER=efa nccl_message_transfer",
             "10.3.35.83: INFO: Function: ofi_init Line: 1102: NET/OFI Setting RDMAV_FORK_SAFE "
             "environment variable to 1.",
             "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any "
             "optimal provider",
             "10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2"]
    code, d = check(tmp_path, lines)
    assert (code, d["transport"], d["attempted"]) == (1, "failed", "ofi")
    assert [r["host"] for r in d["ranks"]] == ["10.3.35.83"]
    # a line that only looks like it (no `Function:`) is none of it
    code, d = check(tmp_path, ["INFO: Line: 686: NET/OFI Selected Provider is efa",
                               L.info("n1", 5, 0, "Using network IB")])
    assert d["provider"] is None


def test_a_job_that_spans_nodes_is_not_called_single_node_when_nothing_was_chosen(tmp_path):
    lines = [L.info(f"spark{i}", 285, 0, f"comm 0x1 rank {i} nRanks 2 nNodes 2 localRanks 1 "
                                         "localRank 0 MNNVL 0") for i in (1, 2)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["nodes"] == 2
    assert "though the job spans 2 nodes" in d["summary"]
    assert "single node" not in d["summary"]
    code, d = check(tmp_path, lines[:1] + [L.info("spark1", 285, 0, "nNodes 1")])
    code, d = check(tmp_path, [L.info("spark1", 285, 0, "comm 0x1 rank 0 nRanks 1 nNodes 1 "
                                                       "localRanks 1 localRank 0 MNNVL 0")])
    assert d["summary"].endswith("(single node, or NCCL_DEBUG=INFO not set)")
    # NCCL's lines are there and none says one node (a JAX job on two nodes whose paste ends
    # before NCCL chose a network): the log may be cut, and NCCL_DEBUG=INFO was set
    code, d = check(tmp_path, [L.info("slice-a", 9, 0, "NCCL_IB_DISABLE set by environment to 1.")])
    assert d["summary"].endswith("(the log may end before NCCL chose one, or the job ran on "
                                 "one node)"), d["summary"]


def test_the_warning_says_after_init_where_the_summary_does(tmp_path):
    # nccl#2057: Socket chosen, Init COMPLETE, then the connection NCCL >= 2.22 sets up at
    # the first collective failed (an AF_UNIX address), passed up to the group's async thread
    h = "VM-16-64-ubuntu"
    lines = [L.info(h, 7, 0, m) for m in (
        "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket",
        "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE")]
    lines += L.warn(h, 7, 0, "ncclSocketInit: connecting to address  with family 1 is neither "
                    "AF_INET(2) nor AF_INET6(10)", where="misc/socket.cc:537")
    lines += [L.info(h, 7, 0, m) for m in ("transport/net_socket.cc:399 -> 3",
                                           "transport/net.cc:860 -> 3", "transport.cc:212 -> 3",
                                           "group.cc:78 -> 3 [Async thread]")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "failed" and d["ranks"][0]["failed_after_init"], d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "net-init-failed")
    assert "NCCL network failed after init" in w and "failed after init" in d["summary"]
    # an HCA's catastrophic error after Init COMPLETE is no setup's: the link that ran broke
    ib = [L.info(h, 8, 0, m) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>", "Using network IB",
        "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE")]
    ib += L.warn(h, 8, 0, "NET/IB : Got async event : local catastrophic error",
                 where="transport/net_ib.cc:84")
    code, d = check(tmp_path, ib + [L.info(h, 8, 0, "transport/net.cc:1227 -> 6")])
    assert d["transport"] == "ib" and "catastrophic" in d["ranks"][0]["link_error"]


def test_aws_ofi_rccl_names_rccl(tmp_path):
    code, d = check(tmp_path, ["NET/OFI Using aws-ofi-rccl 1.4.0",
                               "NET/OFI Selected Provider is cxi (found 4 nics)"])
    assert (d["library"], d["transport"], d["provider"]) == ("rccl", "ofi", "cxi")
    assert d["summary"].endswith("(aws-ofi-rccl 1.4.0)")
    path = L.write_log(tmp_path / "r.log", ["NET/OFI Using aws-ofi-rccl 1.4.0",
                                            "Using network AWS Libfabric"])
    res = CliRunner().invoke(check_log, [str(path)])
    assert "aws-ofi-rccl 1.4.0" in res.output and "aws-ofi-nccl" not in res.output


def test_completion_errors_alone_are_links_that_broke(tmp_path):
    # nccl#2397: a paste of the WARNs only (RoCE, retry exceeded after ten good iterations):
    # a request completed with an error, which only a connected link has
    lines = []
    for host in ("ubuntu2", "ubuntu4"):
        lines += L.warn(host, 9, 0, "NET/IB: Got completion from peer 10.0.0.4<40554> with "
                        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) "
                        "vendor_err=129 hca mlx5_1", where="transport/net_ib.cc:2397")
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], code) == ("ib", None, 0), d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "link-failed")
    assert w.startswith("a link broke while the job ran on it, on 2/2 ranks (NET/IB: Got compl")
    # a failure that is no completion error, with no Init COMPLETE: init failed
    lines = L.warn("n1", 9, 0, "Call to ibv_create_cq failed", where="misc/ibvwrap.cc:268")
    code, d = check(tmp_path, [L.info("n1", 9, 0, "Using network IB"), *lines,
                               L.info("n1", 9, 0, "init.cc:1234 -> 2")])
    assert d["summary"].startswith("fabrikit: ERROR NCCL network init failed on 1/1 ranks")
    # ... and so is a completion error passed up to init
    lines = L.warn("n1", 9, 0, "NET/IB : Got completion from peer 10.0.0.4<1> with error 12",
                   where="transport/net_ib.cc:881")
    code, d = check(tmp_path, [L.info("n1", 9, 0, "Using network IB"), *lines,
                               L.info("n1", 9, 0, "init.cc:1234 -> 6")])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]


def test_rccl_logs_get_rccl_advice(tmp_path):
    # RCCL's plugin is aws-ofi-rccl, loaded as librccl-net.so (LUMI, Frontier)
    lines = [L.info("nid005001", 7, 0, m) for m in (
        "RCCL version 2.18.3+hip6.0", "NET/Plugin : No plugin found (librccl-net.so), using "
        "internal implementation", "NET/IB : No device found.",
        "NET/Socket : Using [0]hsn0:10.1.0.1<0>", "Using network Socket",
        "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0")]
    code, d = check(tmp_path, lines, "--fabric", "slingshot")
    text = " ".join(w["message"] for w in d["warnings"])
    assert "aws-ofi-rccl" in text and "librccl-net.so" in text and "aws-ofi-nccl" not in text
    code, d = check(tmp_path, [x.replace("RCCL version 2.18.3+hip6.0", "NCCL version 2.23.4")
                               .replace("librccl", "libnccl") for x in lines],
                    "--fabric", "slingshot")
    assert "aws-ofi-nccl" in " ".join(w["message"] for w in d["warnings"])


def test_a_link_in_a_link_over_a_source_file(tmp_path):
    # HugeCTR#433: GitHub made `proxy.cc:1519` a link, and the link text a link again
    lines = [L.info("A100-02", 2358430, 1, "Using network IB", tid=2358556),
             "A100-02:2358430:2358556 [1] [[proxy.cc:1519](http://proxy.cc:1519/)]"
             "(http://proxy.cc:1519/) NCCL WARN [Proxy Service 9] Failed to execute operation "
             "Connect from rank 15, retcode 3"]
    code, d = check(tmp_path, lines)
    assert [(r["host"], r["pid"]) for r in d["ranks"]] == [("A100-02", 2358430)]


def test_a_cut_number_glued_to_a_host_is_that_host(tmp_path):
    # a splice left `16169` (a tid's head) before the next line's host, one line each
    a = "g183:161258:16169" + L.info("g183", 161264, 7, "Channel 07/0 : 7[7] -> 15[7] [send] "
                                     "via NET/IB/8/GDRDMA", tid=161695)
    b = L.info("g183", 161264, 7, "Channel 07/0 : 15[7] -> 7[7] [receive] via NET/IB/8/GDRDMA",
               tid=161695)
    code, d = check(tmp_path, [a, b])
    assert [(r["host"], r["pid"]) for r in d["ranks"]] == [("g183", 161264)]
    # two real hosts whose names differ by a letter stay two
    code, d = check(tmp_path, [b, b.replace("g183:", "xg183:")])
    assert len(d["ranks"]) == 2


def test_nccl_2_28_names_the_rank_before_its_message(tmp_path):
    # NCCL 2.28: `NCCL INFO [Rank 5] ncclCommInitRankConfig comm ... rank 5 nranks 8 ...`
    lines = [L.info("node-0", 299590 + r, r, f"[Rank {r}] ncclCommInitRankConfig comm 0x55d1{r} "
                    f"rank {r} nranks 8 cudaDev {r} nvmlDev {r} busId {r}7000 commId 0x673b - "
                    "Init START") for r in range(8)]
    lines += [L.info("node-0", 299590 + r, r, f"[Rank {r}] comm 0x55d1{r} rank {r} nRanks 8 "
                     "nNodes 1 localRanks 8 localRank {r} MNNVL 0") for r in range(8)]
    lines.append(L.info("node-0", 299591, 1, "Using network IB"))
    code, d = check(tmp_path, lines)
    assert d["world_size"] == 8 and sorted(r["rank"] for r in d["ranks"]) == list(range(8))
    assert (d["transport"], d["verdict"]) == ("none", "single-node")


def test_a_bootstrap_on_loopback_is_one_machine(tmp_path):
    # aws/deep-learning-containers#2675: one g5 in Docker, bootstrap on lo, sockets on lo and
    # eth0; rank 0's aws-ofi-nccl gave up, the paste was cut after rank 1's version line
    lines = [L.info("16d2d618f560", 123 + r, r, "Bootstrap : Using lo:127.0.0.1<0>")
             for r in range(4)]
    lines += L.warn("16d2d618f560", 123, 0, "NET/OFI aws-ofi-nccl initialization failed",
                    where="ofi_init:1355")
    lines += [L.info("16d2d618f560", 123, 0, m) for m in (
        "NET/IB : No device found.",
        "NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth0:172.17.0.2<0>", "Using network Socket")]
    lines += [L.info("16d2d618f560", 124, 1, "NET/OFI Using aws-ofi-nccl 1.4.0aws")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["verdict"], d["mixed"], d["inter_node"]) == (
        "none", "single-node", False, False)
    # the same two processes on two machines (bootstrap on their own addresses): rank 1's
    # version line alone chose nothing, since rank 0 shows the plugin giving up
    two = [x.replace("lo:127.0.0.1<0>", "eth0:10.0.0.1<0>") for x in lines]
    two = [x.replace("16d2d618f560:124", "node2:124") for x in two]
    code, d = check(tmp_path, two)
    assert (d["transport"], d["mixed"]) == ("socket", False)
    assert {r["pid"]: r["selected"] for r in d["ranks"]}[124] == "none"


def test_aws_ofi_nccl_1_4_only_efa_is_a_plugin_give_up(tmp_path):
    lines = [L.info("n1", 5, 0, "NET/OFI Using aws-ofi-nccl 1.4.0aws")]
    lines += L.warn("n1", 5, 0, "NET/OFI Only EFA provider is supported", where="ofi_init:1304")
    lines += [L.info("n1", 5, 0, m) for m in ("NET/IB : No device found.",
                                             "NET/Socket : Using [0]eth0:10.0.0.1<0>",
                                             "Using network Socket")]
    lines += [L.info("n2", 6, 0, "Bootstrap : Using eth0:10.0.0.2<0>")]
    code, d = check(tmp_path, lines)
    assert d["ranks"][0]["transport"] == "socket" and d["ranks"][0]["plugin_failed"]


def test_the_summary_counts_every_rank_of_the_kind(tmp_path):
    # some ranks printed their NET/Socket line, the rest only `Using network Socket`
    lines = []
    for r in range(6):
        if r % 3 == 1:
            lines.append(L.info("llm-9", 100 + r, r, "NET/Socket : Using [0]eth0:10.0.0.9<0> "
                                                     "[1]eth1:10.1.0.9<0>"))
        lines.append(L.info("llm-9", 100 + r, r, "Using network Socket"))
    lines.append(L.info("llm-10", 200, 0, "Using network Socket"))
    code, d = check(tmp_path, lines)
    assert "transport Socket/eth0,eth1 on 7/7 ranks" in d["summary"]


def test_collnet_channels_are_sharp_over_ib_between_nodes(tmp_path):
    # nccl#1219 (HPC-X's SHARP plugin, NCCL_COLLNET_ENABLE=1): the paste kept CollNet's
    # channel lines, not the rings'; CollNet runs between nodes only, over IB
    lines = [L.info("node", 176, 5, f"CollNet {c:02d}/0 : 5 [{w}] via COLLNET/SHARP/5/GDRDMA",
                    tid=4360) for c in range(2) for w in ("receive", "send")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"]) == ("ib", True), d["summary"]
    assert d["ranks"][0]["gdrdma"] is True
    # a selection line still says which network the rings used
    code, d = check(tmp_path, [L.info("node", 176, 5, "Using network Socket"), *lines])
    assert d["transport"] == "socket"


def test_nccl_2_28_device_details_are_the_same_devices(tmp_path):
    # DGX Spark over RoCE (NCCL 2.28): each device of the Using line is detailed again
    h = "spark-4440"
    lines = [L.info(h, 24302, 0, m) for m in (
        "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:"
        "10.0.0.1<0>",
        "NET/IB: [1] rocep1s0f1:uverbs1:1/RoCE provider=Mlx5 speed=200000 context=0xc53b ar=0",
        "NET/IB: [3] roceP2p1s0f1:uverbs3:1/RoCE provider=Mlx5 speed=200000 context=0xc53c ar=0",
        "Using network IB")]
    code, d = check(tmp_path, lines)
    assert d["ranks"][0]["ib_devices"] == ["rocep1s0f1:1", "roceP2p1s0f1:1"]


def test_an_error_the_progress_thread_passed_up_is_a_running_link_s(tmp_path):
    # aws-ofi-nccl#927 (NCCL 2.19+, no prefixes left): in a reduce_scatter, the plugin's
    # RDMA protocol met a message it did not expect; NCCL's progress thread passed it up
    lines = ["get_req_from_imm_data:1411 NCCL WARN NET/OFI Unexpected status (0) for message 246",
             "NCCL INFO transport/net.cc:1302 -> 3", "NCCL INFO proxy.cc:698 -> 3",
             "NCCL INFO proxy.cc:878 -> 3 [Progress Thread]"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ofi" and "Unexpected status" in d["ranks"][0]["link_error"]
    # before 2.19 the `[Proxy Thread]` also set links up: a connect's error there failed
    # init (accelerate#609: `Call to recv failed : Connection reset by peer` in net_ib.cc's
    # accept, up to proxy.cc)
    old = [L.info("A100-VM", 36759, 0, m, tid=36970) for m in (
        "transport/net_ib.cc:593 -> 2", "transport/net_ib.cc:734 -> 2", "include/net.h:26 -> 2",
        "transport/net.cc:348 -> 2", "proxy.cc:198 -> 2 [Proxy Thread]")]
    code, d = check(tmp_path, L.warn("A100-VM", 36759, 0, "Call to recv failed : Connection "
                                     "reset by peer", where="include/socket.h:421") + old)
    assert d["transport"] == "failed", d["summary"]


def test_job_end_names_a_broken_link_where_nothing_else_says_why(tmp_path):
    # an IB job that lost a link mid-run, with no srun/torchrun report in its log: the
    # epilogue's cause is that link, on the host that saw it (not "no known cause")
    streams = job(L.ib_rank)
    h, pid = L.rank_host(5), 40000 + 17 * 5
    streams[5] += L.warn(h, pid, 1, "NET/IB : Got completion from peer 10.1.0.2<42> with "
                         "status=12 opcode=0 len=0 vendor err 129 (Recv)",
                         where="transport/net_ib.cc:1696")
    path = L.write_log(tmp_path / "job-7.log", L.interleave(streams, 2))
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def job_end(status: str) -> tuple[int, list[str]]:
        proc = subprocess.run([sys.executable, "-c", "from runner.cli import main; main()",
                               "job-end", "--status", status, "--fabric", "infiniband",
                               str(path)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        return proc.returncode, proc.stdout.strip().splitlines()

    code, out = job_end("1")
    assert code == 1 and len(out) == 2, out
    assert "; then a link broke on 1/8 ranks: NET/IB : Got completion" in out[0]
    assert out[1].startswith(f"fabrikit: FAILED: the job step exited with status 1 after a "
                             f"link broke on {h}: NET/IB : Got completion from peer")
    code, out = job_end("0")  # a step that ended well has no cause, whatever it logged
    assert code == 0 and len(out) == 1, out


def test_a_rendered_table_s_bars_after_each_line_are_no_part_of_it(tmp_path):
    # a gist page rendered a paste as a table: every line ends in ` | |` (NCCL 2.3.7 over
    # sockets between two VMs); the network is `Socket`, not an unknown `Socket | |`
    h = "managed-worker-l83z"
    lines = [L.info(h, 16157, 0, m) + " | |" for m in (
        "NET : Using interface ens12:10.73.0.52<0>",
        "NET/IB : Using interface ens12 for sideband communication",
        "Using internal Network Socket")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket" and not any(
        w["code"] == "unknown-network" for w in d["warnings"]), d["summary"]
    bare = check(tmp_path, [x[:-4] for x in lines])[1]
    assert (bare["transport"], bare["ranks"][0]["network"]) == ("socket", d["ranks"][0]["network"])


def test_the_ofi_plugin_s_gpudirect_line_says_ofi_and_its_nic_the_provider(tmp_path):
    # a field guide quoting two lines of a 2-node Slingshot run, no prefix left: the OFI
    # network checked GPUDirect for HCA 0 `cxi0`, which only a network in use does
    lines = ["NET/OFI : GPU Direct RDMA Enabled for HCA 0 'cxi0'",
             "GPU Direct RDMA Disabled for GPU 3000 / HCA 0 (distance 7 > 6)"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"]) == ("ofi", "cxi"), d["summary"]
    # an EFA NIC's name says no provider; a later device line still decides
    h = "ip-10-0-0-1"
    code, d = check(tmp_path, [L.info(h, 7, 0, "NET/AWS Libfabric : GPU Direct RDMA Enabled "
                                               "for HCA 0 'rdmap16s27'")])
    assert (d["transport"], d["provider"]) == ("ofi", None)
    code, d = check(tmp_path, [L.info(h, 7, 0, m) for m in (
        "NET/OFI : GPU Direct RDMA Enabled for HCA 0 'cxi0'", "NET/Socket : Using [0]eth0:"
        "10.0.0.1<0>", "Using network Socket")])
    assert d["transport"] == "socket"


def test_pytorch_s_echo_of_a_socket_init_warn_fails_the_job(tmp_path):
    # nccl#1837: NCCL_SOCKET_IFNAME named an interface the hosts lack; the log holds one
    # rank's settings and PyTorch's echo of the WARN, under the launcher's own prefix
    h = "twshared1016"
    lines = [f"[trainer3]:{L.info(h, 1958, 3, 'NCCL_SOCKET_IFNAME set by environment to eth2')}",
             "[trainer0|0]:ncclInternalError: Internal check failed.", "[trainer0|0]:Last error:",
             "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither "
             "AF_INET(2) nor AF_INET6(10)"]
    code, d = check(tmp_path, lines)
    assert code == 1 and d["transport"] == "failed" and d["attempted"] is None, d["summary"]
    assert d["ranks"][0]["failure"].startswith("ncclSocketInit: connecting to address")
    # a job whose init completed was not failed by it (an echo from another job step)
    done = lines[:1] + [f"[trainer3]:{L.info(h, 1958, 3, m)}" for m in (
        "NET/Socket : Using [0]eth0:10.0.0.3<0>", "Using network Socket",
        "comm 0x1 rank 3 nranks 4 cudaDev 3 busId 1000 - Init COMPLETE")] + lines[1:]
    code, d = check(tmp_path, done)
    assert d["transport"] != "failed", d["summary"]
    # the WARN itself with its host stripped, then the echo (a lab write-up: NCCL_SOCKET_
    # IFNAME=nonexistent0 on three nodes) is a process's own failed init, as it always was
    code, d = check(tmp_path, [
        "NCCL INFO NCCL_SOCKET_IFNAME set to nonexistent0",
        "bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found",
        "ncclInternalError: Internal check failed.", "Last error:",
        "Bootstrap : no socket interface found"])
    assert d["transport"] == "failed", d["summary"]


def test_one_process_s_affinity_lines_say_it_drives_several_gpus(tmp_path):
    # pytorch-lightning#4420: one process drives both GPUs of one V100 box over sockets on
    # ib0 (NCCL_IB_DISABLE=1); only its `Setting affinity` line shows the second GPU, and
    # every channel is P2P: one machine, not a socket fallback
    h, pid = "cdr2584", 98188
    lines = [L.info(h, pid, 0, m) for m in (
        "Bootstrap : Using ib0:172.19.146.21<0>", "NCCL_IB_DISABLE set by environment to 1.",
        "NET/Socket : Using [0]ib0:172.19.146.21<0>", "Using network Socket")]
    lines += ["NCCL version 2.12.12+cuda11.7",
              L.info(h, pid, 0, "Setting affinity for GPU 0 to 5555", tid=98759),
              L.info(h, pid, 1, "Setting affinity for GPU 1 to aaaa00", tid=98760),
              L.info(h, pid, 0, "Channel 00/04 :    0   1", tid=98759),
              L.info(h, pid, 0, "Channel 00 : 0[18000] -> 1[af000] via P2P/direct pointer",
                     tid=98759)]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none" and d["inter_node"] is False, d["summary"]
    # one GPU per process on that host says nothing of the others: still the choice (where
    # no P2P channel joins the two ranks either: see the test of P2P channels below)
    code, d = check(tmp_path, [x for x in lines if "GPU 1" not in x and "P2P" not in x])
    assert d["transport"] == "socket"


def test_sockets_after_the_plugin_gave_up_on_its_provider_are_a_fallback(tmp_path):
    # the plugin was told to use cxi and gave up; NCCL went on over a management NIC whose
    # name says no fabric: the provider it gave up on says which fabric sockets stood in for
    h = "nid001234"
    lines = [L.info(h, 9, 0, m) for m in (
        "NET/Plugin: Loaded net plugin Libfabric (v10)", "NET/OFI Setting provider_filter to cxi",
        "NET/OFI No eligible providers were found")]
    lines += L.warn(h, 9, 0, "NET/OFI aws-ofi-nccl initialization failed",
                    where="nccl_net_ofi_init:1540")
    lines += [L.info(h, 9, 0, m) for m in ("NET/Socket : Using [0]nmn0:10.100.0.4<0>",
                                            "Using network Socket",
                                            "comm 0x1 rank 0 nRanks 8 nNodes 2 localRanks 4 "
                                            "localRank 0 MNNVL 0")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["verdict"], code) == ("socket", "fallback", 1), d["summary"]
    assert "whose plugin failed" in d["summary"]
    # the same sockets with no plugin in the picture: nothing says which fabric
    code, d = check(tmp_path, lines[5:])
    assert (d["transport"], d["verdict"], code) == ("socket", "fast", 0), d["summary"]


def test_a_device_ib_could_not_open_is_skipped_not_a_failed_init(tmp_path):
    # nccl#2428: eRDMA on two H20 nodes; IB could not open one of its two devices and went
    # on with the other (NCCL's IB init skips such a device). A paste that kept only that
    # WARN shows no failed init
    h = "h20-a"
    warn = L.warn(h, 5, 0, "NET/IB : Unable to open device erdma_1",
                  where="transport/net_ib.cc:202")
    code, d = check(tmp_path, warn)
    assert d["transport"] == "none" and code == 0, d["summary"]
    # ... while a WARN that IB's init gives up with still fails it
    code, d = check(tmp_path, L.warn(h, 5, 0, "NET/IB : ibv_create_cq failed",
                                     where="transport/net_ib.cc:202"))
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    # where it opened none, `No device found` follows and NCCL goes on with sockets
    lines = L.warn(h, 5, 0, "NET/IB : Unable to open device mlx5_0",
                   where="transport/net_ib.cc:202")
    lines += [L.info(h, 5, 0, m) for m in (
        "NET/IB : No device found.", "NET/Socket : Using [0]ib0:10.0.0.1<0>",
        "Using network Socket", "Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "socket", d["summary"]


def test_ib_s_collective_mismatch_is_a_running_link_s_error(tmp_path):
    # nccl#531: a reduce_scatter whose peer posted a receive of another size, on a link
    # that was up (the paste holds the WARN alone); nccl#969's came with the proxy's chain
    h = "n136-081-017"
    warn = L.warn(h, 201805, 0, "NET/IB : collective mismatch error local size 32768 remote "
                  "1048576 addr 0 rkey 3beac3 seq adf/adf", where="transport/net_ib.cc:667")
    code, d = check(tmp_path, warn)
    assert d["transport"] == "ib" and "collective mismatch" in d["ranks"][0]["link_error"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "link-failed")
    assert "the application's bug, not the network's" in w and "switches" not in w, w
    # before its init completed, the same words fail it (a communicator line, no COMPLETE)
    code, d = check(tmp_path, [L.info(h, 201805, 0, "NET/IB : Using [0]mlx5_0:1/IB ; OOB "
                                                     "ib0:10.0.0.1<0>"),
                               L.info(h, 201805, 0, "comm 0x1 rank 0 nranks 16 cudaDev 0 "
                                                     "busId 1000 - Init START")] + warn)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


@pytest.mark.parametrize("event", [
    "Got async event : local access violation work queue error",
    "Got async event : local work queue catastrophic error", "Got async event : CQ error",
    "async fatal event on QP (0x7f69f01519a8): local access violation work queue error"])
def test_ib_async_event_on_a_work_queue_is_a_running_link_s_error(tmp_path, event):
    # nccl#1710: an AllReduce over RoCE; one node's async thread reports a QP access error
    # three times, the other's progress thread a completion error: a QP exists and carries
    # requests only on a link that is up, so the job ran on IB, and the link broke
    a = L.warn("node201", 127799, 0, f"NET/IB : mlx5_0:1 {event}",
               where="transport/net_ib.cc:101")
    b = L.warn("node023", 10214, 0, "NET/IB : Got completion from peer 10.1.3.201<33057> "
               "with status=9 opcode=0 len=0 vendor err 138 (Send)",
               where="transport/net_ib.cc:1909")
    b += [L.info("node023", 10214, 0, "transport/net.cc:1137 -> 6"),
          L.info("node023", 10214, 0, "proxy.cc:698 -> 6")]
    code, d = check(tmp_path, a * 3 + b)
    assert d["transport"] == "ib" and d["verdict"] != "failed", d["summary"]
    assert event[-20:] in next(r for r in d["ranks"] if r["host"] == "node201")["link_error"]



@pytest.mark.parametrize("event", [
    "Got async event : port error", "Got async error event: port error",
    "Got async event : local catastrophic error", "async fatal event: local catastrophic error"])
def test_an_ib_port_or_device_failing_in_a_running_job_is_its_link_s_error(tmp_path, event):
    # lit-llama#380: 4 nodes, `iter 83594: loss 1.9491`, then every rank's async thread says
    # `port error`; nccl#230: `local catastrophic error` after 830K iterations, then the
    # thread's own `Call to ibv_get_async_event failed`. The job ran on IB, then it broke.
    h = "gpu-48"
    lines = ["iter 83594: loss 1.9491, time: 512.36ms"]
    for pid in (34050, 34051):
        lines += L.warn(h, pid, 0, f"NET/IB : mlx5_0:1 {event}", where="transport/net_ib.cc:93")
        lines += L.warn(h, pid, 0, "Call to ibv_get_async_event failed",
                        where="misc/ibvwrap.cc:220")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["verdict"] != "failed", d["summary"]
    assert all(event in r["link_error"] for r in d["ranks"]), d["ranks"]
    # ... while init was still under way (a communicator line, no Init COMPLETE): a failed
    # init, the port down before any link was up
    start = [L.info(h, 34050, 0, "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"),
             L.info(h, 34050, 0, "comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init START")]
    code, d = check(tmp_path, start + L.warn(h, 34050, 0, f"NET/IB : mlx5_0:1 {event}",
                                             where="transport/net_ib.cc:93"))
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


@pytest.mark.parametrize("event", ["Got async event : client reregistration",
                                   "Got async error event: GID table change",
                                   "async fatal event on SRQ, unused for now (0x1): SRQ error"])
def test_an_ib_async_event_that_fails_nothing_is_no_failure_nor_choice(tmp_path, event):
    # DeepSpeed#3272 on one node: a subnet manager's `client reregistration` while the job
    # ran; a vLLM TP=4 pod's `GID table change`. NCCL calls these non-fatal (SRQs it does
    # not use); they say IB opened its devices, which it does on one node too.
    code, d = check(tmp_path, L.warn("07d92dd514d4", 142935, 0, f"NET/IB : mlx5_3:1 {event}",
                                     where="transport/net_ib.cc:100"))
    assert d["transport"] == "none" and code == 0 and d["verdict"] == "none", d["summary"]


def test_a_helper_threads_warn_device_is_not_a_second_gpu_of_the_process(tmp_path):
    # nccl-tests#360 (alltoall over RoCE, 2 nodes x 8, one GPU per process): IB's async
    # thread, which never set a device, WARNs under `[0]` in the process on GPU 1, whose
    # progress thread then passes the error up under `[1]`. One process on one GPU, not a
    # process driving two (which would make its host one machine): the job ran on IB
    h, pid = "node-0", 5899
    lines = [L.info("node-0", 5898, 0, "NET/IB: IbDev 0 Port 1 qpn 2740 set_ece={supported=1, "
                    "vendor_id=0x15b3, options=0x0, comp_mask=0x0}", tid=6033)]
    lines += L.warn(h, pid, 0, "NET/IB : mlx5_4:1 async fatal event on QP (0x762cfc0e23c8): "
                    "invalid request local work queue error", where="transport/net_ib.cc:154")
    lines += L.warn(h, pid, 1, "communicator encountered a fatal error (detected in "
                    "ncclIbIrecv)", where="transport/net_ib.cc:113")
    lines += [L.info(h, pid, 1, m, tid=6045) for m in (
        "transport/net_ib.cc:2117 -> 2", "transport/net.cc:1335 -> 2", "proxy.cc:728 -> 2",
        "proxy.cc:912 -> 2 [Progress Thread]")]
    code, d = check(tmp_path, lines)
    assert d["inter_node"] is None and d["transport"] == "ib", d["summary"]
    [r] = [r for r in d["ranks"] if r["pid"] == pid]
    assert r["cuda_dev"] == 1 and "async fatal event" in r["link_error"], r
    # a process whose own INFO lines name two devices drives both: one machine
    two = [L.info(h, 7001, dev, "NET/IB : Using [0]mlx5_0:1/RoCE ; OOB ens1:10.0.0.1<0>")
           for dev in (0, 1)] + [L.info(h, 7001, 0, "Using network IB")]
    code, d = check(tmp_path, two)
    assert d["inter_node"] is False and d["transport"] == "none", d["summary"]


def test_a_host_whose_gpus_0_and_n_1_hold_ranks_0_and_n_1_holds_the_world(tmp_path):
    # vllm#18731: a TP=8 pod on one host, IB initialised; the paste kept the comm lines of
    # ranks 0 and 7 only, on GPUs 0 and 7. A node of a bigger job holds rank n-1 on GPU n-1
    # only with every rank before it there too: one machine, no traffic between nodes
    h = "vllm-head-0"

    def rank(r: int, dev: int, n: int = 8) -> list[str]:
        return [L.info(h, 30483 + r, dev, m) for m in (
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.5<0>",
            "Using network IB",
            f"ncclCommInitRank comm 0x{r + 1:x} rank {r} nranks {n} cudaDev {dev} nvmlDev {dev} "
            "busId 1000 commId 0x9 - Init START")]

    code, d = check(tmp_path, rank(0, 0) + rank(7, 7))
    assert (d["transport"], d["inter_node"]) == ("none", False), d["summary"]
    # ranks 0 and 7 of 16 on GPUs 0 and 7: a node of a two-node job, which used IB
    code, d = check(tmp_path, rank(0, 0, 16) + rank(7, 7, 16))
    assert d["transport"] == "ib", d["summary"]
    # rank 7 on GPU 3 (four GPUs a node): its node holds ranks 4-7 only
    code, d = check(tmp_path, rank(0, 0) + rank(7, 3))
    assert d["transport"] == "ib", d["summary"]


def test_a_host_with_most_of_the_worlds_ranks_holds_the_world(tmp_path):
    # vllm#14025: a TP=4 pod, NCCL_IB_DISABLE=1, `Using network Socket`; the paste kept three
    # processes, two of them with their `rank N nranks 4` lines. Nodes hold as many ranks
    # each, so a host with more than half of them is the only one: no traffic between nodes
    h = "ml-model-qwen-656c698fd-oszkq"

    def proc(pid: int, dev: int, rank: int | None) -> list[str]:
        out = [L.info(h, pid, dev, m) for m in ("NCCL_IB_DISABLE set by environment to 1.",
                                                 "NET/Socket : Using [0]eth0:10.192.53.169<0>",
                                                 "Using network Socket")]
        if rank is not None:
            out.append(L.info(h, pid, dev, f"ncclCommInitRank comm 0x{pid:x} rank {rank} "
                                           f"nranks 4 cudaDev {dev} busId {dev + 1}000 - Init START"))
        return out

    code, d = check(tmp_path, proc(274, 1, None) + proc(275, 2, 1) + proc(276, 3, 2))
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("none", False, 1), d["summary"]
    # two of four on one host: half a world, as one node of two holds
    code, d = check(tmp_path, proc(275, 2, 1) + proc(276, 3, 2))
    assert d["transport"] == "socket" and d["inter_node"] is None, d["summary"]


def test_two_runs_pasted_together_do_not_make_a_host_hold_the_world(tmp_path):
    # nccl-tests#128's shape: a 2 x 4-GPU job's init (IB chosen, no rank lines), then the
    # `Destroy COMPLETE` lines of another run (new pids) naming rank 0 on one host and
    # rank 4 on the other. Each host shows 5 processes for a world of 8, but only 4 GPUs:
    # half a world each, as two nodes hold
    lines = []
    for n, h in enumerate(("gpu-a17", "gpu-b03")):
        for dev in range(4):
            pid = 7000 + 100 * n + dev
            lines += [L.info(h, pid, dev, m) for m in (
                f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/RoCE [RO]; OOB ib0:10.1.0.{n + 1}<0>",
                "Using network IB", f"Setting affinity for GPU {dev} to ffff,00000000")]
    for n, h in enumerate(("gpu-a17", "gpu-b03")):
        lines.append(L.info(h, 9000 + n, 0, f"comm 0x7f{n}0 rank {4 * n} nranks 8 cudaDev 0 "
                                            "busId 1f000 - Destroy COMPLETE"))
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("ib", True, 2), d["summary"]
    # one run on one host, 5 processes of 5 GPUs for a world of 8: most of it, the only host
    one = [x for x in lines if x.startswith("gpu-a17")]
    one.append(L.info("gpu-a17", 7004, 4, "Using network IB"))
    code, d = check(tmp_path, one)
    assert (d["transport"], d["inter_node"]) == ("none", False), d["summary"]


def test_plugin_error_pasted_apart_from_the_chain_names_what_was_attempted(tmp_path):
    # nccl#1913's shape: the rank's chain names no network (`transport/net.cc:476 -> 2`),
    # and the plugin's WARNs, pasted below it without their prefix, say OFI
    h = "efa-test-worker-0"
    lines = [L.info(h, 19817, 0, m) for m in ("transport/net.cc:476 -> 2",
                                              "transport/net.cc:1202 -> 2 [Async thread]")]
    lines += ["Test NCCL failure all_reduce.cu:471 'internal error - please report this issue "
              "to the NCCL developers'", ""]
    lines += [f"NET/OFI Unexpected number of remote rails for dev {d}. Expected 3 but got 2"
              for d in range(2)]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"], code) == ("failed", "ofi", 1), d["summary"]
    code, d = check(tmp_path, lines[:4])  # without them nothing says which network
    assert (d["transport"], d["attempted"]) == ("failed", None), d["summary"]


def test_the_fallback_advice_names_the_ib_hca_setting_the_log_echoes(tmp_path):
    # a Slurm job over IPoIB (hubutui's committed outputs): NCCL_IB_HCA named a device whose
    # port was down, IB found no device and NCCL fell back; the image was not the cause
    lines = []
    for n in range(2):
        h, pid = f"pgpu2{n}", 2967405 + n
        lines += [f"{n}: " + L.info(h, pid, 0, m) for m in (
            "NCCL_IB_HCA set to mlx5_2", "NET/IB : No device found.",
            f"NET/Socket : Using [0]ib0:10.0.0.{n + 1}<0>", "Using network Socket",
            "comm 0x1 rank %d nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0" % n)]
    code, d = check(tmp_path, lines, "--fabric", "infiniband")
    assert (d["transport"], code) == ("socket", 1), d["summary"]
    says = {w["code"]: w["message"] for w in d["warnings"]}
    for code_ in ("socket-fallback", "ib-no-device"):
        assert "NCCL_IB_HCA=mlx5_2 (the log echoes it)" in says[code_], says
    # without it the advice is the image's alone
    code, d = check(tmp_path, [x for x in lines if "IB_HCA" not in x], "--fabric", "infiniband")
    assert not any("NCCL_IB_HCA" in w["message"] for w in d["warnings"])


def test_an_nvls_cuda_failure_on_one_host_is_init_failing_in_the_node(tmp_path):
    # vllm#9369: a TP=4 run on one host; NVLS (NVLink SHARP, within the node) met a CUDA
    # failure and init.cc passed it up: no network was involved
    h, pid = "kmaker-54-033138205093", 44713
    lines = [L.info(h, pid, 1, m) for m in (
        "NET/Socket : Using [0]eth0:10.1.2.3<0>", "Using network Socket")]
    lines += L.warn(h, pid, 1, "Cuda failure 3 'initialization error'",
                    where="transport/nvls.cc:246")
    lines += [L.info(h, pid, 1, c) for c in ("init.cc:1010 -> 1", "init.cc:1548 -> 1",
                                              "group.cc:64 -> 1 [Async thread]")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none", d["summary"]
    assert d["ranks"][0]["local_failure"] == "Cuda failure 3 'initialization error'"


def test_job_end_names_an_init_that_failed_in_the_node_where_nothing_else_says_why(tmp_path):
    # a container's /dev/shm too small for NCCL's segments; srun and torchrun report
    # nothing of their own: the epilogue's cause is the shared-memory failure, on its host
    h, pid = "gpu07", 3121
    lines = [L.info(h, pid, 0, "Using network Socket")]
    lines += L.warn(h, pid, 0, "Error: failed to extend /dev/shm/nccl-H1dBqY to 9637892 bytes",
                    where="misc/shmutils.cc:72")
    lines += [L.info(h, pid, 0, c) for c in ("transport/shm.cc:114 -> 2", "transport.cc:33 -> 2",
                                              "init.cc:1026 -> 2")]
    path = L.write_log(tmp_path / "job-8.log", lines)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", "from runner.cli import main; main()",
                           "job-end", "--status", "1", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout.strip().splitlines()
    assert proc.returncode == 1 and len(out) == 2, (out, proc.stderr)
    assert "NCCL init failed within the node on 1/1 ranks: Error: failed to extend" in out[0]
    assert out[1].startswith("fabrikit: FAILED: the job step exited with status 1 after NCCL "
                             "init failed within the node gpu07: Error: failed to extend")


def test_a_plugin_that_gave_up_is_told_also_where_the_log_ends_there(tmp_path):
    # a UCCL postmortem's p5en pods: the paste ends with aws-ofi-nccl giving up (NCCL goes
    # on with its own transports, which the log does not show): no choice, and a warning
    lines = []
    for where, msg in (("nccl_net_ofi_rdma_init:7978", "NET/OFI OFI fi_getinfo() call failed: "
                        "No data available"),
                       ("nccl_net_ofi_create_plugin:335", "NET/OFI aws-ofi-nccl initialization "
                        "failed"),
                       ("nccl_net_ofi_init:155", "NET/OFI Initializing plugin failed")):
        lines += L.warn("p5en-0", 77, 0, msg, where=where)
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none", d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "plugin-failed")
    assert w.endswith("the log does not show what NCCL went on with (its own IB or Socket)")
    code, d = check(tmp_path, lines + [L.info("p5en-0", 77, 0, m) for m in (
        "NET/Socket : Using [0]enp71s0:10.1.0.5<0>", "Using network Socket")])
    w = next(w["message"] for w in d["warnings"] if w["code"] == "plugin-failed")
    assert w.endswith("NCCL went on with Socket/enp71s0"), w


def test_the_ofi_tuner_s_node_count_outranks_a_split_communicator_s(tmp_path):
    # a HyperPod TP4xDP2 job on two p6-b200 (torchrun's `[defaultN]:` prefix): the paste kept
    # the TP communicators' `nNodes 1`, and aws-ofi-nccl's tuner line for the job's
    # communicator of 8 ranks on 2 nodes; the author cut one host to `...`
    h = "tp4-dp2-inference-pods-0"
    lines = [f"[default0]:{L.info(h, 78, 0, m, tid=140)}" for m in (
        "comm 0x55bd rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0",
        "NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)",
        "NET/OFI Region Tuner init (platform 2): comm with 8 ranks and 2 nodes.",
        "NET/OFI Tuner init: comm with 8 ranks and 2 nodes.")]
    lines.insert(1, "[default3]:...:81:150 [3] NCCL INFO ncclCommSplit comm 0x557c rank 3 nranks 4 "
                    "cudaDev 3 nvmlDev 3 busId 87000 parent 0x557b splitCount 2 color 2003953581 "
                    "key 3- Init START")
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"], d["inter_node"]) == ("ofi", "efa", True), d["summary"]
    assert d["nodes"] == 2
    # without the tuner's lines the split communicator's `nNodes 1` is all there is
    code, d = check(tmp_path, [x for x in lines if "Tuner" not in x])
    assert d["transport"] == "none" and d["nodes"] == 1, d["summary"]


def test_a_sanitized_communicator_pointer_still_tells_its_rank_and_nodes(tmp_path):
    # a reproduction repo's sanitized logs (`NODE_A:1:1`, `comm <PTR>`): the communicator
    # line still says rank 0 of 2 on 2 nodes; over IB
    lines = [L.info("NODE_A", 1, 0, m) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>", "Using network IB",
        "comm <PTR> rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        "ncclCommInitRank comm <PTR> rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1a000 commId "
        "<COMM_ID> - Init COMPLETE")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], d["nodes"], d["world_size"]) == ("ib", True, 2, 2)
    assert d["ranks"][0]["rank"] == 0


def test_ib_s_fatal_error_noticed_by_a_data_call_is_a_running_link_s_error(tmp_path):
    # nccl-tests#360: alltoall over RoCE after all_reduce had run; IB's async thread saw a
    # fatal QP event, and NCCL >= 2.24's check at the next data call says where it noticed
    # (`communicator encountered a fatal error (detected in ncclIbIrecv)`), passed up to the
    # progress thread. The job ran on IB; a link broke.
    h = "node-0"
    lines = L.warn(h, 139583, 0, "NET/IB : mlx5_3:1 async fatal event on QP (0x76fd): invalid "
                   "request local work queue error", where="transport/net_ib.cc:154")
    lines += L.warn(h, 139572, 1, "communicator encountered a fatal error (detected in "
                    "ncclIbIrecv)", where="transport/net_ib.cc:113")
    lines += [L.info(h, 139572, 1, m) for m in (
        "transport/net_ib.cc:2117 -> 2", "transport/net.cc:1335 -> 2", "proxy.cc:728 -> 2",
        "proxy.cc:912 -> 2 [Progress Thread]")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["verdict"] != "failed", d["summary"]
    r = next(r for r in d["ranks"] if r["pid"] == 139572)
    assert r["transport"] == "ib" and "ncclIbIrecv" in r["link_error"], r


@pytest.mark.parametrize("reclaim", [True, False])
def test_a_teardown_error_after_the_job_ran_is_no_failed_init(tmp_path, reclaim):
    # a 2-node IB job completed its init and trained; at destroy_process_group() one rank's
    # bootstrap closed with connections it never took (bootstrapClose), which NCCL passes up
    # through init.cc's commFree, and commReclaim says the cleanup failed (NCCL >= 2.14)
    streams = job(L.ib_rank, nodes=2, gpn=2, nccl="2.21.5")
    lines = L.interleave(streams, 1) + ["Finished training; calling destroy_process_group()"]
    h, pid = streams[0][0].split(":")[0], 40000
    lines += L.warn(h, pid, 0, "Unexpected connections are not empty", where="bootstrap.cc:1021")
    lines += [L.info(h, pid, 0, m) for m in ("init.cc:236 -> 3", "init.cc:1930 -> 3")]
    if reclaim:
        lines += L.warn(h, pid, 0, "commReclaim: cleanup comm 0x55d0c0de0000 rank 0 failed in "
                        "destroy/abort, error 3", where="init.cc:2012")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and code == 0 and d["attempted"] is None, d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["ib"] * 4
    assert "Unexpected connections are not empty" in d["ranks"][0]["nccl_warnings"]
    # ... where the same words come before any Init COMPLETE, init still failed on the error
    # the job met first
    cut = [x for x in lines if "Init COMPLETE" not in x]
    early = L.warn(h, pid, 0, "Call to ibv_create_cq failed", where="misc/ibvwrap.cc:268")
    first = next(i for i, x in enumerate(cut) if x.startswith(f"{h}:{pid}:") and "Using network"
                 in x)
    cut[first + 1:first + 1] = early + [L.info(h, pid, 0, "transport/net_ib.cc:600 -> 2"),
                                        L.info(h, pid, 0, "init.cc:1100 -> 2")]
    code, d = check(tmp_path, cut)
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]
    assert "ibv_create_cq" in d["ranks"][0]["failure"]


def test_nccl_tests_failure_after_a_link_broke_keeps_the_transport(tmp_path):
    # nccl-tests over IB printed its rows, then a request failed on a link that was up
    # (`Got completion from peer ... status=12`, passed up to the progress thread), and
    # nccl-tests said `Test NCCL failure ... 'remote process exited or there was a network
    # error'`: the job ran on IB and a link broke; NCCL's own lines say which
    streams = job(L.ib_rank, nodes=2, gpn=2, nccl="2.19.3")
    lines = L.interleave(streams, 2)
    h, pid = streams[2][0].split(":")[0], 40000 + 17 * 2
    lines += ["     1048576        262144     float     sum      -1    45.10   23.25   34.88      0"]
    lines += L.warn(h, pid, 0, "NET/IB : Got completion from peer 10.3.0.1<51130> with status=12 "
                    "opcode=0 len=0 vendor err 129 (Send)", where="transport/net_ib.cc:1696")
    lines += [L.info(h, pid, 0, m) for m in ("transport/net_ib.cc:1802 -> 6",
                                             "transport/net.cc:1125 -> 6", "proxy.cc:693 -> 6",
                                             "proxy.cc:874 -> 6 [Progress Thread]")]
    lines += [f"{h}: Test NCCL failure common.cu:1035 'remote process exited or there was a "
              "network error / '"]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib" and d["attempted"] is None, d["summary"]
    assert [r["transport"] for r in d["ranks"]] == ["ib"] * 4
    assert "status=12" in next(r["link_error"] for r in d["ranks"] if r["link_error"])
    # ... with no WARN of NCCL's, nccl-tests' failure is all that says the link failed
    code, d = check(tmp_path, [x for x in lines if "NCCL WARN" not in x and " -> 6" not in x])
    assert d["transport"] == "failed" and d["attempted"] == "ib", d["summary"]


def test_a_warn_whose_message_a_paste_wrapped_after_its_tag_is_read_whole(tmp_path):
    # a DGX Spark pair's notes: `transport/net_ib.cc:2470 NCCL WARN NET/IB:`, then the
    # completion error on the next line, not indented, then its GIDs; read the same by the
    # block reader (check-log on a file) and by feed() (a stream of lines)
    head = "[2025-11-19 18:02:33] gx10-9c8c:22890:22900 [0] transport/net_ib.cc:2470 NCCL WARN "
    lines = [L.info("gx10-9c8c", 22890, 0, "NET/IB : Using [0]roceP2p1s0f0:1/RoCE [RO]; OOB "
                    "enP2p1s0f0:10.77.0.2<0>"),
             L.info("gx10-9c8c", 22890, 0, "Using network IB"),
             L.info("gx10-9c8c", 22890, 0, "ncclCommInitRank comm 0xaf6b rank 1 nranks 2 "
                    "cudaDev 0 busId f01000 commId 0x1 - Init COMPLETE"),
             head + "NET/IB:",
             "Got completion from peer 10.77.0.1<35162> with status=12 opcode=129 len=65536 "
             "vendor err 129 (Recv)",
             "localGid ::ffff:10.77.0.2 remoteGids::ffff:10.77.0.1 hca roceP2p1s0f0", "",
             L.info("gx10-9c8c", 22890, 0, "comm 0xaf6b rank 1 nranks 2 cudaDev 0 busId "
                    "f01000 - Abort COMPLETE")]
    code, d = check(tmp_path, lines)
    err = d["ranks"][0]["link_error"] or ""
    assert d["transport"] == "ib" and "status=12" in err and "remoteGids" in err, d["ranks"]
    v = analyse(lines)
    assert v.transport is Transport.IB and "status=12" in (v.ranks[0].link_error or "")
    # (a tag alone ends where the next log line starts: that line is read as its own)
    lines[5] = L.info("gx10-9c8c", 22890, 0, "Using network Socket")
    code, d = check(tmp_path, lines[:6])
    assert "Using network" not in (d["ranks"][0]["link_error"] or "-"), d["ranks"]
    assert d["ranks"][0]["network"] == "Socket", d["ranks"]


@pytest.mark.parametrize("line", [
    'NET/OFI Setting NCCL_PROTO to "simple"', "NET/OFI Libfabric provider associates MRs "
    "with domains", "NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR"])
def test_aws_ofi_nccl_s_init_lines_say_the_plugin_initialised(tmp_path, line):
    # nccl-tests#245: two g5 nodes, a paste cut before `Selected provider` and `Using
    # network`; the plugin's own init lines say it loaded and went on, as its version line
    # does; a later choice still wins, and so does the plugin giving up
    h = "ip-10-0-0-1"
    start = [L.info(h, 7, 0, line), L.info(h, 7, 0, "comm 0x2515 rank 0 nranks 2 cudaDev 0 "
                                                    "nvmlDev 0 busId 1e0 - Init START")]
    code, d = check(tmp_path, start)
    assert d["transport"] == "ofi", d["summary"]
    code, d = check(tmp_path, start + [L.info(h, 7, 0, "Using network Socket")])
    assert d["transport"] == "socket", d["summary"]
    code, d = check(tmp_path, start + [L.info(h, 7, 0, "NET/OFI aws-ofi-nccl initialization "
                                                       "failed"),
                                       L.info(h, 7, 0, "NET/IB : No device found.")])
    assert d["transport"] != "ofi", d["summary"]


def test_pytorchs_echo_of_a_network_warn_is_read_where_it_is_all_the_log_holds(tmp_path):
    # aws-ofi-nccl#663: two p5 nodes, NCCL_DEBUG unset; PyTorch's traceback ends with the
    # last error, `NET/OFI Unable to insert remote address into address vector` (a security
    # group that blocked EFA's traffic): OFI's init failed. nccl#1928 on Slingshot: `NET/OFI
    # Request ... completed with error ... UNDELIVERABLE` at the first collective.
    tb = ["[rank1]: Traceback (most recent call last):",
          "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
          "1970, internal error - please report this issue to the NCCL developers, NCCL "
          "version 2.20.5", "[rank1]: ncclInternalError: Internal check failed.",
          "[rank1]: Last error:"]
    av = "[rank1]: NET/OFI Unable to insert remote address into address vector for device 1. RC: 0"
    code, d = check(tmp_path, tb + [av])
    assert (d["transport"], d["attempted"]) == ("failed", "ofi"), d["summary"]
    lost = ("[rank1]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 "
            "(UNDELIVERABLE). Completed length: 0")
    code, d = check(tmp_path, tb + [lost])
    assert d["transport"] == "ofi" and "UNDELIVERABLE" in d["ranks"][0]["link_error"], d
    # beside NCCL's own lines the echo is only theirs: the ranks' own lines decide
    own = [L.info("ip-1", 9, 0, m) for m in (
        "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
        "Using network Libfabric", "ncclCommInitRank comm 0x1 rank 0 nranks 16 cudaDev 0 "
        "busId 1000 commId 0x2 - Init COMPLETE")]
    code, d = check(tmp_path, own + tb + [av])
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]
    assert d["verdict"] != "failed", d["summary"]


def test_the_echo_of_a_socket_connect_that_failed_for_good_fails_the_init(tmp_path):
    # Two srun tasks; the second's NCCL retries its bootstrap connect (INFO lines only, the
    # first node's listener gone), then PyTorch's traceback ends with the WARN it gave up on
    # (`exceeded error retry count`): the init failed, trying no network yet.
    h, pid = "g15", 20394
    retries = [L.info(h, pid, 0, "socketPollConnect: connect returned Connection refused, "
                                 f"retrying ({k}/34) after sleep for {100 * k} msec")
               for k in (1, 2, 3)]
    tb = ["[rank1]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, "
          "remote process exited or there was a network error, NCCL version 2.26.2",
          "[rank1]: Last error:"]
    gave_up = "socketPollConnect: connect returned Connection refused, exceeded error retry count (35)"
    code, d = check(tmp_path, retries + tb + ["[rank1]: " + gave_up])
    assert (d["transport"], d["attempted"]) == ("failed", None) and code == 1, d["summary"]
    assert gave_up in d["summary"], d["summary"]
    # the retries alone may still have connected: nothing failed
    code, d = check(tmp_path, retries + tb)
    assert d["transport"] == "none", d["summary"]
    # under a prefix that names no rank (line numbers of a viewer, Ray's worker tag), and
    # as a logger writes NCCL's immediate refusal after its own prefix (an RL actor whose
    # address was a container's bridge)
    for line in (" 125  [rank1]: " + gave_up,
                 "[rank1]: socketPollConnect: connect to 10.1.0.7&lt;42307&gt; returned Connection "
                 "timed out, exceeded error retry count after 35 attempts",  # (HTML-escaped)
                 "(worker1, rank=1, pid=27522, ip=10.0.0.4) [rank4]: [rank4]: " + gave_up,
                 "(Actor pid=3249, ip=10.0.0.3) ERROR 03-21 14:01:57 worker_base.py:581] "
                 "socketStartConnect: Connect to 172.18.0.2<44801> failed : Software caused "
                 "connection abort"):
        code, d = check(tmp_path, retries + tb + [line])
        assert d["transport"] == "failed", (line, d["summary"])
    # beside a rank that chose and used a network, the echo is only that rank's last word
    own = [L.info("g13", 7, 0, m) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.0.13<0>", "Using network IB",
        "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0")]
    code, d = check(tmp_path, own + tb + ["[rank1]: " + gave_up])
    assert d["transport"] == "ib", d["summary"]


@pytest.mark.parametrize("head", [
    "Last RCCL warning: '", "Last NCCL warning(error): '",
    "Last NCCL warning(error) log entry (may be unrelated) '"])
def test_the_last_warning_an_error_quotes_is_read_as_that_warn(tmp_path, head):
    # RCCL's and XLA's errors quote NCCL's last WARN (a JAX job on eight MI300X nodes whose
    # QPs timed out INIT -> RTR, the message wrapped over the next lines by the notes)
    lines = ["jax.errors.JaxRuntimeError: INTERNAL: RCCL operation ncclCommInitRankConfig(...)",
             "   failed: unhandled system error",
             head + "Call to ibv_modify_qp failed with 110 Connection timed out,",
             "   on dev mlx5_0:1, curr state INIT, next state RTR,",
             "   remote GID ::ffff:10.224.3.40'"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]
    # a fault of the node's own that the error quotes names no network
    code, d = check(tmp_path, lines[:2] + [head + "Cuda failure 2 'out of memory''."])
    assert d["transport"] == "none", d["summary"]


@pytest.mark.parametrize("quote", ["- `{}`", "* {}", "`{}`", "+ `{}`,"])
def test_lines_quoted_as_markdown_list_items_or_inline_code_are_read(tmp_path, quote):
    # notes on a GIN proxy between two p6 nodes quote NCCL's lines as a list of inline code
    lines = [quote.format("NET/OFI Selected provider is efa, fabric is efa-direct (found 16 "
                          "nics)"),
             quote.format("Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA"),
             "- each machine lists `NIC group 0..7`, two EFA devices per group"]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"], d["inter_node"]) == ("ofi", "efa", True), d["summary"]
    # a verbs error quoted so is still the WARN it was (a list item is no launcher's tag)
    code, d = check(tmp_path, [quote.format(
        "NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>"), quote.format(
        "Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr "
        "state INIT, next state RTR")])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]


def test_nodes_are_nccl_s_count_where_ncclhostid_made_two_pods_one_host(tmp_path):
    # nccl#1781: two pods on one machine, NCCL_HOSTID set so that NCCL sees one host
    # (`nNodes 1`) and connects them over P2P: one node, not the two pod names
    lines = []
    for rank, pod in enumerate(("worker-0", "worker-1")):
        lines += [L.info(pod, 100 + rank, 0, m) for m in (
            "NCCL_HOSTID set by environment to 10.10.10.10",
            f"comm 0x56 rank {rank} nRanks 2 nNodes 1 localRanks 2 localRank {rank} MNNVL 0",
            f"Channel 00/0 : {rank}[{rank}] -> {1 - rank}[{1 - rank}] via P2P/CUMEM",
            f"ncclCommInitRank comm 0x56 rank {rank} nranks 2 cudaDev 0 busId 1000 commId "
            "0x9 - Init COMPLETE")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("none", False, 1), d["summary"]
    assert "spans" not in d["summary"], d["summary"]
    # without NCCL_HOSTID, host names count (`nNodes 1` may be one tensor-parallel group's)
    code, d = check(tmp_path, [x for x in lines if "HOSTID" not in x])
    assert d["nodes"] == 2, d["summary"]


def test_a_bare_line_after_kubectl_s_nanosecond_timestamp_is_read(tmp_path):
    # `kubectl logs --timestamps` writes RFC 3339 with nanoseconds before each line; a
    # pod's stripped NCCL line after it is read as after a shorter clock
    line = "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"
    for ts in ("2024-05-01T10:00:05.123456789Z ", "2024-05-01T10:00:05.123Z "):
        code, d = check(tmp_path, [ts + line, ts + "Using network Libfabric"])
        assert (d["transport"], d["provider"]) == ("ofi", "efa"), (ts, d["summary"])


def test_a_paste_indented_as_a_list_s_code_block_keeps_its_tags(tmp_path):
    # a markdown list's code block indents the whole paste: Open MPI's tags still say each
    # line's rank, and a list item's inline code inside it is still read
    lines = [f"    [1,{r}]<stdout>:{L.info(f'worker-{r // 8}', 20, 0, m)}" for r, m in (
        (0, "comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init START"),
        (8, "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"))]
    code, d = check(tmp_path, lines)
    assert sorted(r["rank"] for r in d["ranks"]) == [0, 8], d["ranks"]
    code, d = check(tmp_path, ["  - `NET/OFI Selected provider is efa, fabric is efa-direct "
                               "(found 16 nics)`"])
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_byte_order_mark_is_no_part_of_the_first_line(tmp_path, encoding):
    # Notepad saves UTF-8 with a byte-order mark, and Windows PowerShell's `> log.txt`
    # writes UTF-16 with one. A paste cut in its first line's host (`pu-node-07` of
    # `gpu-node-07`) is that host's cut line, not another host's, with the mark too.
    lines = ["pu-node-07:7:7 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>"] + [
        L.info("gpu-node-07", 7, 0, m) for m in (
            "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>", "Using network IB",
            "Channel 00/0 : 0[0] -> 4[0] [send] via NET/IB/0")]
    path = tmp_path / "bom.log"
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    res = CliRunner().invoke(check_log, [str(path), "--json"])
    d = json.loads(res.output)
    assert [(r["host"], r["transport"]) for r in d["ranks"]] == [("gpu-node-07", "ib")], d["ranks"]
    v = analyse(["\ufeff" + lines[0]] + lines[1:])
    assert [(r.host, r.transport) for r in v.ranks] == [("gpu-node-07", Transport.IB)]


def test_libfabric_s_efa_abort_under_a_launcher_s_tag_is_still_its_warn(tmp_path):
    # a g5 whose EFA device has no RDMA read: libfabric writes its abort itself, so under
    # Open MPI's tag, srun's label or torchrun's it is the same failure as without one, not
    # PyTorch's echo of a WARN (NCCL never printed it)
    lines = ["NET/OFI Selected provider is efa, fabric is efa (found 1 nics)",
             "FI_EFA_USE_DEVICE_RDMA=1 was set by user, but EFA device has no rdma-read "
             "capability.  Application will abort()."]
    for tag in ("", "[1,0]<stderr>:", "0: ", "[default0]:"):
        code, d = check(tmp_path, [tag + x for x in lines])
        assert (d["transport"], d["attempted"]) == ("failed", "ofi"), (tag, d["summary"])


def test_a_bootstrap_failure_on_one_node_is_no_network_s_failure(tmp_path):
    # nccl#1382 (JAX, nine 4090s in one machine): one process drives the GPUs, its
    # bootstrap's accept fails and init returns the error: NCCL chose no network, and no
    # traffic was to leave the node, so the job failed on none (the verdict is none; the
    # summary still names the failure)
    h = "gpu-box-000"
    lines = L.warn(h, 275204, 4, "socketTryAccept: Accept failed: Bad file descriptor",
                   where="misc/socket.cc:415")
    for dev in (4, 3):
        lines += [L.info(h, 275204, dev, m, tid=275650 + dev) for m in (
            "misc/socket.cc:559 -> 2", "bootstrap.cc:280 -> 2", "init.cc:1388 -> 2")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"]) == ("none", False), d["summary"]
    assert "Accept failed" in d["summary"], d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "init-failed-in-node")
    assert "bootstrap sockets" in w, w
    # ... while with a process per GPU nothing says the job stayed on the node: it failed
    one = [x.replace(":275204:", f":{275204 + i}:") for i, x in enumerate(lines)]
    code, d = check(tmp_path, [x.replace(" [3] ", " [4] ") for x in one])
    assert d["transport"] == "failed", d["summary"]


def test_a_container_on_docker_s_default_bridge_is_one_machine(tmp_path):
    # `docker run` without --network=host: the container's host name is its id and its one
    # address is on the default bridge (172.17.0.0/16), NATed to its own machine; NCCL
    # falls back to sockets there (no IB device), and its sockets reach that machine only
    # (round logs of vLLM, Megatron, Lightning in such containers: all one machine)
    h = "c6e071419451"
    lines = []
    for dev in range(4):
        lines += [L.info(h, 770438 + dev, dev, m) for m in (
            "Bootstrap : Using eth0:172.17.0.3<0>", "NET/IB : No device found.",
            "NET/Socket : Using [0]eth0:172.17.0.3<0>", "Using network Socket")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("none", False, 1), d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "docker-bridge")
    assert "--network=host" in w, w
    # the machine's own name or address (--network=host): other machines may be in it
    for a, b in (("c6e071419451", "gpu-node-1"), ("172.17.0.3", "10.1.0.3")):
        code, d = check(tmp_path, [x.replace(a, b) for x in lines])
        assert d["transport"] == "socket" and "docker-bridge" not in [
            w["code"] for w in d["warnings"]], (b, d["summary"])


def test_ranks_on_sockets_beside_ranks_on_ib_are_a_fallback(tmp_path):
    # NeMo#4035: one node's ranks used IB (IBext), the other's, with NCCL_IB_DISABLE=1 and
    # no device, sockets; no --fabric given. The IB ranks show the fabric: the socket ranks
    # fell back from it (exit 1), not "cannot tell"
    ib = [L.info("gpu01", 10, 0, m) for m in (
        "NET/IB : Using [0]mlx5_9:1/RoCE ; OOB eno1:10.0.0.1<0>", "Using network IB",
        "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0")]
    sock = [L.info("gpu02", 20, 0, m) for m in (
        "NET/IB : No device found.", "NET/Socket : Using [0]eno1:10.0.0.2<0>",
        "Using network Socket", "Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0")]
    code, d = check(tmp_path, ib + sock)
    assert (d["mixed"], d["verdict"], code) == (True, "fallback", 1), d["summary"]
    assert "the ranks that used IB" in d["summary"], d["summary"]
    # sockets alone, with no fabric given: still cannot tell
    code, d = check(tmp_path, sock)
    assert (d["verdict"], code) == ("fast", 0), d["summary"]


def test_an_old_p2p_warn_is_a_fault_in_the_node(tmp_path):
    # pytorch#4921, NCCL 2.1 (no `NCCL` before the level): CUDA ran out of memory and
    # transport/p2p.cu could not get a CUDA IPC handle (which only GPUs of one machine
    # share); init returned the error. No network was in play: none, the fault named.
    h = "c460c041"
    lines = [f"{h}:101211:106353 [0] INFO CUDA Dev 0, IB Ports : mlx5_2/1(SOC) mlx5_0/1(SOC)",
             f"{h}:101211:106353 [0] init.cu:218 WARN Cuda failure 'out of memory'",
             f"{h}:101211:106353 [0] transport/p2p.cu:404 WARN rank 1 failed to get CUDA IPC "
             "handle to device 0 : 11 invalid argument"]
    lines += [f"{h}:101211:106353 [0] INFO {m}" for m in (
        "init.cu:191 -> 3", "init.cu:266 -> 3", "misc/group.cu:70 -> 3 [Async thread]")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none", d["summary"]
    assert "init-failed-in-node" in [w["code"] for w in d["warnings"]], d["warnings"]


def test_a_failure_after_libibverbs_would_not_load_was_trying_sockets(tmp_path):
    # pytorch/examples#689 (NCCL 2.4, NCCL_DEBUG=WARN: no INFO lines): both ranks could not
    # load libibverbs, so sockets were all they had; then a connect was refused
    lines = L.warn("id-d3", 714, 0, "Failed to open libibverbs.so[.1]", where="misc/ibvwrap.cu:63")
    lines += L.warn("id-d3", 715, 1, "Failed to open libibverbs.so[.1]", where="misc/ibvwrap.cu:63")
    lines += L.warn("id-d3", 715, 1, "Connect to 172.18.0.1<49273> failed : Connection refused",
                    where="include/socket.h:382")
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"]) == ("failed", "socket"), d["summary"]
    # (with a plugin loaded, libibverbs' absence says nothing of what the plugin tried)
    code, d = check(tmp_path, [L.info("id-d3", 715, 1, "NET/Plugin: Loaded net plugin IBext "
                                                       "(v4)")] + lines)
    assert d["attempted"] != "socket", d["summary"]


def test_an_error_chain_whose_page_escaped_its_arrows_is_read(tmp_path):
    # a log copied from a web page that escaped it (pytorch#76288: `-&gt;`, `&lt;0&gt;`):
    # the chain from IB's connect up to init still says init failed while trying IB
    h = "node1"
    lines = [L.info(h, 7, 0, "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1&lt;0&gt;"),
             L.info(h, 7, 0, "Using network IB")]
    lines += L.warn(h, 7, 0, "NET/IB : Got completion from peer 10.0.0.2&lt;45011&gt; with "
                    "error 12, opcode 0, len 0, vendor err 129", where="transport/net_ib.cc:1076")
    lines += [L.info(h, 7, 0, m) for m in (
        "transport/net_ib.cc:1214 -&gt; 2", "transport/net.cc:412 -&gt; 2",
        "transport.cc:168 -&gt; 2", "init.cc:1263 -&gt; 2", "group.cc:72 -&gt; 2 [Async thread]")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]
    code, d = check(tmp_path, [x.replace("-&gt;", "->") for x in lines])
    assert (d["transport"], d["attempted"]) == ("failed", "ib"), d["summary"]


def test_a_bootstrap_reset_in_one_container_is_advised_as_the_bootstrap_s(tmp_path):
    # nccl#963: several threads of one process in one container initialise communicators
    # at once; the bootstrap's sockets to the container's own address are reset. The job
    # stayed in the node (Docker's default bridge): the advice is the bootstrap's, not
    # shared memory's
    h = "9306dc444753"
    lines = [L.info(h, 248281, 3, "Bootstrap : Using eth0:172.17.0.2<0>")]
    lines += L.warn(h, 248281, 3, "Net : Connect to 172.17.0.2<40537> failed : Connection reset "
                   "by peer", where="misc/socket.cc:456")
    lines += [L.info(h, 248281, 3, m, tid=248335) for m in (
        "bootstrap.cc:256 -> 6", "init.cc:516 -> 6", "init.cc:1089 -> 6",
        "group.cc:64 -> 6 [Async thread]")]
    lines += L.warn(h, 248281, 2, "Net : Call to recv from 172.17.0.2<40537> failed : "
                    "Connection reset by peer", where="misc/socket.cc:518")
    code, d = check(tmp_path, lines)
    assert d["transport"] == "none", d["summary"]
    w = next(w["message"] for w in d["warnings"] if w["code"] == "init-failed-in-node")
    assert "bootstrap sockets" in w and "shm" not in w, w


def _two_ranks_over(via: str, ranks: int = 2, joined: tuple[int, ...] = (0, 1)) -> list[str]:
    """A job whose paste lost its host prefixes (a TRACE build's notes, a TP=2 pod's excerpt):
    NCCL chose Socket, as it does on one node too, and nothing names the nodes."""
    lines = ["NCCL INFO Bootstrap : Using eth0:10.10.1.1<0>", "NCCL version 2.14.3+cuda11.2",
             "NCCL INFO NET/Socket : Using [0]eth0:10.10.1.1<0>", "NCCL INFO Using network Socket",
             f"NCCL INFO comm 0x212a200 rank 0 nranks {ranks} cudaDev 0 busId 3f000 - Init START",
             f"NCCL INFO Channel 00/02 :    {'   '.join(map(str, range(ranks)))}"]
    for ch in range(2):
        for a, b in zip(joined, joined[1:] + joined[:1]):
            lines.append(f"NCCL INFO Channel {ch:02d}/0 : {a}[{a}000] -> {b}[{b}000] via {via}")
    return lines + [f"NCCL INFO comm 0x212a200 rank 0 nranks {ranks} cudaDev 0 busId 3f000 - Init COMPLETE"]


@pytest.mark.parametrize("via", ["P2P/IPC", "P2P/CUMEM/read", "SHM/direct/direct"])
def test_p2p_channels_that_join_every_rank_keep_the_job_on_one_node(tmp_path, via):
    # P2P (NVLink, PCIe) and shared memory reach only GPUs of the same node: where such
    # channels join every rank of the communicator and none goes through the network, the
    # job stayed on one node, whatever network NCCL chose
    code, d = check(tmp_path, _two_ranks_over(via))
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("none", False, 1), d["summary"]
    # a channel through the network crossed nodes
    code, d = check(tmp_path, _two_ranks_over(via) + [
        "NCCL INFO Channel 00/0 : 1[1000] -> 0[0] [send] via NET/Socket/0"])
    assert (d["transport"], d["inter_node"]) == ("socket", True), d["summary"]
    # ranks 2 and 3 of 4, joined to nothing, may be on another node: nothing is known
    code, d = check(tmp_path, _two_ranks_over(via, ranks=4))
    assert (d["transport"], d["nodes"]) == ("socket", None), d["summary"]
    code, d = check(tmp_path, _two_ranks_over(via, ranks=4, joined=(0, 1, 2, 3)))
    assert (d["transport"], d["nodes"]) == ("none", 1), d["summary"]


def test_the_p2p_channels_are_read_again_from_compressed_logs_and_by_the_job_epilogue(tmp_path):
    # the passes never keep P2P channel lines (most of a big job's log): the judgment reads
    # the files again, decompressed as the first time, and the job's own last line does too
    import gzip

    from runner.job_end_cmd import job_end

    plain = L.write_log(tmp_path / "job.log", _two_ranks_over("P2P/IPC"))
    (tmp_path / "job.log.gz").write_bytes(gzip.compress(plain.read_bytes()))
    code, d = check(tmp_path, _two_ranks_over("P2P/IPC"))
    res = CliRunner().invoke(check_log, [str(tmp_path / "job.log.gz"), "--json"])
    assert json.loads(res.output)["transport"] == "none", res.output
    end = CliRunner().invoke(job_end, [str(plain), "--status", "0"])
    assert end.exit_code == 0 and end.output.splitlines()[0] == d["summary"], (end.output, d["summary"])
    # stdin cannot be read twice: judged without those lines, as the network NCCL chose
    res = CliRunner().invoke(check_log, ["-", "--json"], input=plain.read_bytes())
    assert json.loads(res.output)["transport"] == "socket", res.output


def test_an_indented_line_inside_an_export_s_prefix_is_read(tmp_path):
    # a status report's indented NCCL line, exported by CloudWatch or stamped by a logger:
    # the indent comes after the export's own prefix
    line = "  NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.1<0>"
    for head in ("", "  | 2024-12-04T05:27:39.074Z | ", "2024-12-04 05:27:39,074 "):
        code, d = check(tmp_path, [head + line, head + "  Using network IB"])
        assert d["transport"] == "ib", (head, d["summary"])


def test_four_prefixes_on_a_stripped_line_are_read(tmp_path):
    # aws-ofi-nccl's test logger under pdsh, Open MPI's tags around it, exported by
    # CloudWatch: four prefixes before the message (fabric-facts: line shapes stack)
    lines = [f"  | 2024-12-04T05:27:39.074Z | [1,{r}]<stdout>:10.3.35.8{r}: INFO: Function: "
             f"ofi_init Line: 686: NET/OFI Selected Provider is efa" for r in range(2)]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"]) == ("ofi", "efa"), d["summary"]


def test_ray_s_worker_tag_is_a_launcher_s_prefix(tmp_path):
    # Ray prints each worker's output after its tag: `(RayWorkerWrapper pid=5419,
    # ip=10.0.0.2) `, Ray Train's `(worker1, rank=1, pid=27522, ip=10.105.0.4) `. A line
    # stripped of NCCL's prefix under it is read, and the tag's ip is its node
    lines = [f"(RayWorkerWrapper pid={5419 + n}, ip=10.0.0.{n + 1}) {m}" for n in range(2) for m in (
        "NET/Plugin: Loaded net plugin AWS Libfabric (v5)",
        "NET/OFI Selected Provider is cxi (found 4 nics)", "Using network AWS Libfabric")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"]) == ("ofi", "cxi"), d["summary"]
    assert sorted(r["host"] for r in d["ranks"]) == ["10.0.0.1", "10.0.0.2"], d["ranks"]
    # PyTorch's echo of NCCL's socket WARN under Ray Train's tag: init failed before any
    # network was chosen, as without the tag
    echo = ("[rank1]:ncclSocketInit: connecting to address  with family 59936 is neither "
            "AF_INET(2) nor AF_INET6(10)")
    for tag in ("", "(worker1, rank=1, pid=27522, ip=10.105.0.4) "):
        code, d = check(tmp_path, [
            tag + "[rank1]:" + L.info("node1", 1958, 0, "NCCL_SOCKET_IFNAME set by environment to eth2"),
            f"{tag}[rank1]:ncclInternalError: Internal check failed.",
            f"{tag}[rank1]:Last error:", tag + echo])
        assert d["transport"] == "failed", (tag, d["summary"])


def test_a_logger_s_clock_is_no_host_pid_and_thread(tmp_path):
    # `2024-12-04 05:27:39 [0] NCCL INFO ...`: a logger's time before a line whose host was
    # stripped reads like `host:pid:tid`; it is a time, and the lines are one process's
    lines = [f"2024-12-04 05:{m:02d}:{s:02d} [0] NCCL INFO {msg}" for m, s, msg in (
        (27, 39, "NET/OFI Selected Provider is efa (found 4 nics)"),
        (27, 41, "Using network AWS Libfabric"),
        (28, 45, "Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA"))]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"], len(d["ranks"])) == ("ofi", "efa", 1), d["ranks"]
    assert d["ranks"][0]["host"] not in ("05", ""), d["ranks"]


def test_a_bracketed_time_is_no_launcher_s_label(tmp_path):
    # `[2026-01-15 02:30:45] NCCL INFO ...` (a guide's expected output): each line's time
    # differs, and it names no process: the lines are one process's, not one each
    lines = [f"[2026-01-15 02:30:{s:02d}] NCCL INFO {m}" for s, m in (
        (45, "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"),
        (52, "Channel 02/0 : 8[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA"))]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["provider"], len(d["ranks"])) == ("ofi", "efa", 1), d["ranks"]
    # and a stripped WARN after it is the rank's own WARN, not a launcher's echo of it
    code, d = check(tmp_path, ["[2026-01-15 02:30:45] NET/OFI Unexpected number of remote "
                               "rails for dev 0. Expected 3 but got 2"])
    assert (d["transport"], d["attempted"]) == ("failed", "ofi"), d["summary"]


def test_p2p_channels_on_a_page_that_escaped_their_arrows_keep_the_job_on_one_node(tmp_path):
    lines = [x.replace("->", "-&gt;").replace("<0>", "&lt;0&gt;") for x in _two_ranks_over("P2P/IPC")]
    code, d = check(tmp_path, lines)
    assert (d["transport"], d["inter_node"], d["nodes"]) == ("none", False, 1), d["summary"]


# How logs reach a reader besides as written (fabric-facts, "Line shapes"): each keeps every
# line whole and names no process, so each must leave the verdict as it was. (A launcher's
# tag names one: it may join lines that no prefix told apart.)
_EXPORTS = {
    "cloudwatch": lambda line: "  | 2024-12-04T05:27:39.074Z | " + line,
    "kubectl": lambda line: "2024-12-04T05:27:39.074123456Z " + line,
    "logger-clock": lambda line: "2024-12-04 05:27:39,074 " + line,
    "bracketed-clock": lambda line: "[2024-12-04 05:27:39] " + line,
    "quoted": lambda line: "> " + line,
    "code-block": lambda line: "    " + line,
    "trailing-blanks": lambda line: line + "   ",
    # a notebook's output, each line a JSON string of its `text` list
    "notebook": lambda line: '      ' + json.dumps(line + "\n") + ",",
    # Docker's json-file log driver: a record per line
    "docker-json": lambda line: json.dumps({"log": line + "\n", "stream": "stdout",
                                            "time": "2024-12-04T05:27:39.074123456Z"}),
    # ... after a clock a shipper put before the record
    "docker-json-clocked": lambda line: "2024-12-04T05:27:39.074123456Z " + json.dumps(
        {"log": line + "\n", "stream": "stdout", "time": "2024-12-04T05:27:39.074123456Z"}),
    # a CloudWatch Logs Insights export to CSV: the time, then the message as a CSV field
    "csv": lambda line: '2024-12-04T05:27:39.074Z,"' + line.replace('"', '""') + '"',
}


@pytest.mark.parametrize("export", sorted(_EXPORTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_export_of_the_log_keeps_its_verdict(tmp_path, case, export):
    def verdict(lines: list[str]) -> tuple:
        code, d = check(tmp_path, lines)
        return (d["transport"], d["provider"], d["attempted"], d["mixed"], d["nodes"],
                d["verdict"], len(d["ranks"]))

    lines = CASES[case]()
    assert verdict([_EXPORTS[export](x) for x in lines]) == verdict(lines)


def test_kubectl_s_pod_prefix_names_the_pod(tmp_path):
    # `kubectl logs -l job=train --prefix` tags each line with its pod and container; a
    # pod's stripped lines are that pod's, on its own host
    lines = [f"[pod/trainer-{n}/trainer] {m}" for n in range(2) for m in (
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.%d<0>" % (n + 1), "Using network IB")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib", d["summary"]
    assert sorted(r["host"] for r in d["ranks"]) == ["trainer-0", "trainer-1"], d["ranks"]


def test_a_notebook_s_output_is_read_as_its_lines(tmp_path):
    # an .ipynb keeps a cell's output as a list of JSON strings, each ending in an escaped
    # newline: `"r29n2:27102:27102 [0] NCCL INFO Using network Socket\n",`. A one-GPU run's
    # ring of one rank and its bare version line still say what they say
    lines = [L.info("r29n2", 27102, 0, m) for m in (
        "Bootstrap : Using [0]admin0:145.101.32.23<0>", "NET/IB : No device found.",
        "NET/Socket : Using [0]admin0:145.101.32.23<0>", "Using network Socket")]
    lines += ["NCCL version 2.7.8+cuda10.2"] + [
        L.info("r29n2", 27102, 0, f"Channel {c:02d}/32 :    0", tid=27224) for c in range(4)]
    plain = check(tmp_path, lines)[1]
    assert (plain["transport"], plain["nccl_version"]) == ("none", "2.7.8"), plain["summary"]
    code, d = check(tmp_path, ["   " + json.dumps(x + "\n") + "," for x in lines])
    assert (d["transport"], d["nodes"], d["nccl_version"]) == ("none", plain["nodes"], "2.7.8"), d["summary"]


def test_open_mpi_s_time_before_its_tag_is_taken_off(tmp_path):
    # `mpirun --timestamp-output --tag-output` writes ctime's time, then the tag, with no
    # blank: `Thu Jun 18 14:28:58 2020[1,3]<stdout>:`. A stripped line after it is read,
    # as the rank the tag names
    lines = [f"Thu Jun 18 14:28:58 2020[1,{r}]<stdout>:{m}" for r in (3, 4) for m in (
        "NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.233.64.8%d<0>" % r, "Using network IB")]
    code, d = check(tmp_path, lines)
    assert d["transport"] == "ib", d["summary"]
    assert sorted(r["rank"] for r in d["ranks"]) == [3, 4], d["ranks"]
