"""Tests for runner.nccl_log (the parser) and runner.check_log_cmd (`fabrikit check-log`).

The logs are synthetic, built by tests/nccl_logs.py from the line formats in
shared/reference/fabric-facts.md.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nccl_logs as L  # noqa: E402

from runner.check_log_cmd import check_files, check_log, format_table  # noqa: E402
from runner.errors import UserError  # noqa: E402
from runner.nccl_log import (  # noqa: E402
    WARNING_CODES,
    Fabric,
    LogAnalyser,
    LogVerdict,
    Transport,
    Verdict,
    analyse,
    iter_stream_lines,
    proto_excludes_ll128,
)

REPO = Path(__file__).resolve().parent.parent
NCCL_VERSIONS = ("2.18.3", "2.21.5", "2.23.4", "2.27.3", "2.28.9")


def run(streams, seed=0, fabric=None, env=None) -> LogVerdict:
    return analyse(L.interleave(streams, seed), expected_fabric=fabric, env=env)


def per_rank(v: LogVerdict):
    return [(r.rank, r.host, r.pid, r.transport, r.label, r.provider, r.ib_devices,
             r.socket_ifaces) for r in v.ranks]


# --------------------------------------------------------------------------------------------
# OFI


def test_ofi_cxi_plugin_160_reference_summary():
    v = run(L.job(L.ofi_cxi_rank), fabric="slingshot")
    assert v.transport is Transport.OFI
    assert v.provider == "cxi"
    assert v.nccl_version == "2.23.4"
    assert v.plugin == "AWS Libfabric" and v.plugin_api == "v6"
    assert v.plugin_version == "1.6.0"
    assert v.verdict is Verdict.FAST and v.exit_code == 0
    assert v.warnings == ()
    assert v.summary == "fabrikit: transport OFI/cxi on 8/8 ranks (NCCL 2.23.4, aws-ofi-nccl 1.6.0)"
    assert [r.rank for r in v.ranks] == list(range(8))
    assert all(r.nics == 8 and r.gdrdma and r.net_channels > 0 for r in v.ranks)
    assert v.nodes == 2 and v.world_size == 8


def test_ofi_current_plugin_format():
    v = run(L.job(L.ofi_cxi_rank, nccl="2.28.9", plugin="1.14.0", current_plugin_format=True,
                  net_name="Libfabric", env={"NCCL_PROTO": "^LL128"}), fabric="slingshot")
    assert v.transport is Transport.OFI and v.provider == "cxi"
    assert v.ofi_fabric == "cxi" and v.libfabric_version == "1.22"
    assert v.plugin_version == "1.14.0" and v.plugin == "Libfabric"
    assert all(r.nics == 4 and r.ofi_fabric == "cxi" for r in v.ranks)
    assert v.verdict is Verdict.FAST and v.warnings == ()


@pytest.mark.parametrize("net_name", ["AWS Libfabric", "Libfabric", "OFI"])
@pytest.mark.parametrize("current", [False, True])
def test_all_three_plugin_network_names(net_name, current):
    v = run(L.job(L.ofi_cxi_rank, net_name=net_name, current_plugin_format=current),
            fabric="slingshot")
    assert v.transport is Transport.OFI
    assert {r.network for r in v.ranks} == {net_name}
    assert v.verdict is Verdict.FAST


@pytest.mark.parametrize("nccl", NCCL_VERSIONS)
def test_ofi_cxi_across_nccl_versions(nccl):
    v = run(L.job(L.ofi_cxi_rank, nccl=nccl, env={"NCCL_PROTO": "^LL128"}), fabric="slingshot")
    assert v.nccl_version == nccl
    assert v.verdict is Verdict.FAST
    assert [r.rank for r in v.ranks] == list(range(8))


def test_ofi_efa():
    v = run(L.job(L.ofi_efa_rank, current_plugin_format=True, ofi_fabric="efa-direct", nics=32))
    assert v.transport is Transport.OFI and v.provider == "efa" and v.ofi_fabric == "efa-direct"
    assert v.fabric is None and v.verdict is Verdict.FAST
    assert v.summary.startswith("fabrikit: transport OFI/efa on 8/8 ranks")


def test_ofi_tcp_provider_on_slingshot_is_a_fallback():
    v = run(L.job(L.ofi_cxi_rank, provider="tcp"), fabric="slingshot")
    assert v.transport is Transport.OFI and v.provider == "tcp"
    assert v.verdict is Verdict.FALLBACK and v.exit_code == 1
    assert "ofi-slow-provider" in v.warning_codes
    assert v.summary.startswith("fabrikit: WARNING transport OFI/tcp on 8/8 ranks: ")


def test_provider_inferred_slingshot_from_cxi():
    v = run(L.job(L.ofi_cxi_rank))
    assert v.fabric is Fabric.SLINGSHOT and v.fabric_inferred_from == "libfabric provider cxi"
    assert v.expected_fabric is None


def test_plugin_tried_twice_then_loaded_is_not_missing():
    v = run(L.job(L.ofi_cxi_rank, missing_first=True), fabric="slingshot")
    assert v.verdict is Verdict.FAST
    assert "plugin-missing" not in v.warning_codes


def test_no_gdrdma_warning():
    v = run(L.job(L.ofi_cxi_rank, gdr=False), fabric="slingshot")
    assert v.verdict is Verdict.FAST
    assert v.warning_codes == ("no-gdrdma",)


# --------------------------------------------------------------------------------------------
# InfiniBand


def test_ib_devices_and_fast():
    v = run(L.job(L.ib_rank), fabric="infiniband")
    assert v.transport is Transport.IB
    assert all(r.ib_devices == ("mlx5_0:1", "mlx5_1:1") for r in v.ranks)
    assert v.verdict is Verdict.FAST and v.exit_code == 0 and v.warnings == ()
    assert v.summary == "fabrikit: transport IB/mlx5_0:1,mlx5_1:1 on 8/8 ranks (NCCL 2.21.5)"


@pytest.mark.parametrize("nccl", NCCL_VERSIONS)
def test_ib_across_versions(nccl):
    v = run(L.job(L.ib_rank, nccl=nccl, devices=("mlx5_0:1",)), fabric="infiniband")
    assert v.transport is Transport.IB and v.nccl_version == nccl
    assert v.ranks[0].label == "IB/mlx5_0:1"


def test_ib_roce_and_ibext_plugin_count_as_ib():
    v = run(L.job(L.ib_rank, link="RoCE", net_name="IBext_v8"), fabric="infiniband")
    assert v.transport is Transport.IB and v.verdict is Verdict.FAST
    assert v.ranks[0].ib_devices == ("mlx5_0:1", "mlx5_1:1")


def test_ib_no_device_then_socket_on_infiniband():
    v = run(L.job(L.socket_rank, iface="eth0", nccl="2.21.5"), fabric="infiniband")
    assert v.transport is Transport.SOCKET and v.verdict is Verdict.FALLBACK
    assert {"socket-fallback", "ib-no-device"} <= set(v.warning_codes)
    assert v.exit_code == 1


def test_ib_no_device_and_nothing_else_is_a_cut_log_not_a_failure():
    # after `No device found` NCCL looks for sockets and prints them, or a WARN; a log that
    # ends there was cut (rounds 20-23 of real logs: three such pastes, wave 1 said failed)
    v = run(L.job(L.ib_no_device_only), fabric="infiniband")
    assert v.transport is Transport.NONE and v.verdict is not Verdict.FAILED
    assert "ib-no-device" in v.warning_codes
    # ... while one that then failed init (no socket either) did fail, trying IB
    lines = []
    for r, s in enumerate(L.job(L.ib_no_device_only)):
        h, pid = L.rank_host(r), 40000 + 17 * r
        lines += s + L.warn(h, pid, r % 4, "NET/Socket : no usable interface found",
                            where="transport/net_socket.cc:398")
    v = run([lines], fabric="infiniband")
    assert v.transport is Transport.FAILED and v.verdict is Verdict.FAILED
    assert "net-init-failed" in v.warning_codes and v.exit_code == 1


def test_libibverbs_no_driver_warning():
    lines = L.interleave(L.job(L.socket_rank, iface="ib0", nccl="2.21.5"), 4)
    lines.insert(3, "[nid001000] libibverbs: Warning: no userspace device-specific driver found "
                    "for /sys/class/infiniband_verbs/uverbs0")
    v = analyse(lines)
    assert v.fabric is Fabric.INFINIBAND and v.fabric_inferred_from == "interface ib0"
    assert "ibverbs-no-driver" in v.warning_codes
    msg = dict((w.code, w.message) for w in v.warnings)["ibverbs-no-driver"]
    assert "nid001000" in msg
    assert v.verdict is Verdict.FALLBACK


# --------------------------------------------------------------------------------------------
# Sockets and missing plugins


LOUD = ("fabrikit: WARNING transport Socket/hsn0 on 8/8 ranks: NCCL fell back to TCP sockets "
        "on a slingshot fabric (5-40x slower)")


@pytest.mark.parametrize("nccl", NCCL_VERSIONS)
def test_socket_fallback_on_slingshot_every_plugin_missing_format(nccl):
    v = run(L.job(L.socket_rank, nccl=nccl), fabric="slingshot")
    assert v.transport is Transport.SOCKET
    assert v.verdict is Verdict.FALLBACK and v.exit_code == 1
    assert v.summary == LOUD
    assert v.warning_codes[:2] == ("socket-fallback", "plugin-missing")
    assert all(r.plugin_missing == L.plugin_missing(nccl) for r in v.ranks)


def test_plugin_missing_formats_are_the_documented_ones():
    assert L.plugin_missing("2.18.3") == ("NET/Plugin : No plugin found, using internal "
                                          "implementation")
    assert L.plugin_missing("2.21.5") == "NET/Plugin: No plugin found (libnccl-net.so)"
    assert L.plugin_missing("2.23.4") == ("NET/Plugin: Could not find: libnccl-net.so. "
                                          "Using internal network plugin.")
    assert L.plugin_missing("2.28.9") == "NET/Plugin: Could not find: libnccl-net.so"


def test_tuner_and_profiler_plugin_missing_lines_do_not_count():
    streams = L.job(L.ofi_cxi_rank)
    streams[0] = [streams[0][0],
                  L.info("nid001000", 40000, 0, "TUNER/Plugin: Could not find: libnccl-tuner.so"),
                  L.info("nid001000", 40000, 0,
                         "PROFILER/Plugin: Could not find: libnccl-profiler.so"),
                  *streams[0][1:]]
    v = run(streams, fabric="slingshot")
    assert v.ranks[0].plugin_missing is None and v.warnings == ()


def test_socket_on_ethernet_is_expected():
    v = run(L.job(L.socket_rank, iface="eth0", with_plugin_missing=False, ib_no_device=False),
            fabric="ethernet")
    assert v.verdict is Verdict.FAST and v.exit_code == 0 and v.warnings == ()
    assert v.summary.startswith("fabrikit: transport Socket/eth0 on 8/8 ranks")


def test_socket_without_fabric_on_plain_interface_is_not_flagged_but_noted():
    v = run(L.job(L.socket_rank, iface="eth0"))
    assert v.fabric is None and v.verdict is Verdict.FAST
    assert "no --fabric given" in v.summary


def test_socket_on_hsn_without_fabric_infers_slingshot():
    v = run(L.job(L.socket_rank, iface=("hsn0", "hsn1")))
    assert v.fabric is Fabric.SLINGSHOT and v.fabric_inferred_from == "interface hsn0"
    assert v.verdict is Verdict.FALLBACK and "socket-fallback" in v.warning_codes
    assert v.ranks[0].socket_ifaces == ("hsn0", "hsn1")
    assert "inferred from interface hsn0" in v.summary


def test_single_node_socket_is_not_a_fallback():
    for nccl in ("2.18.3", "2.23.4"):  # nNodes line only from 2.19; older: hosts vs nranks
        v = run(L.job(L.socket_rank, nodes=1, nccl=nccl), fabric="slingshot")
        assert v.verdict is Verdict.SINGLE_NODE and v.exit_code == 0
        assert "socket-fallback" not in v.warning_codes
        assert "plugin-missing" in v.warning_codes  # it will bite on two nodes
        assert v.summary.startswith("fabrikit: single node: NCCL network not used "
                                    "(selected Socket/hsn0 on 4/4 ranks)")


def test_single_node_has_no_ll128_hazard():
    v = run(L.job(L.ofi_cxi_rank, nodes=1, nccl="2.27.3"), fabric="slingshot")
    assert v.verdict is Verdict.SINGLE_NODE and "ll128-hazard" not in v.warning_codes


def test_one_rank_file_of_a_two_node_job_is_not_single_node():
    # Only one host's ranks, NCCL 2.18 (no nNodes line), no channel lines: nranks=8 > 4 seen.
    streams = L.job(L.socket_rank, nccl="2.18.3", channels=False)[:4]
    v = run(streams, fabric="slingshot")
    assert v.verdict is Verdict.FALLBACK
    assert "ranks-missing" in v.warning_codes


# --------------------------------------------------------------------------------------------
# Failures and "none"


def test_network_not_found_is_failed():
    v = run(L.job(L.failed_rank), fabric="slingshot")
    assert v.transport is Transport.FAILED and v.verdict is Verdict.FAILED and v.exit_code == 1
    assert v.warning_codes[0] == "network-not-found"
    assert all(r.failure == "network AWS Libfabric not found" for r in v.ranks)
    assert v.summary.startswith("fabrikit: ERROR NCCL network init failed on 8/8 ranks: "
                                "network AWS Libfabric not found")


def test_warn_line_with_timestamp_and_function_current_nccl():
    v = run(L.job(L.failed_rank, nccl="2.28.9", timestamp="2026-01-05 10:11:12",
                  func="ncclNetInit", name="Libfabric"))
    assert v.verdict is Verdict.FAILED
    assert {r.failure for r in v.ranks} == {"network Libfabric not found"}
    assert v.ranks[0].nccl_warnings == ("Error: network Libfabric not found.",)


def test_network_not_found_with_empty_name():
    lines = L.warn("n1", 5, 0, "Error: network  not found.")
    v = analyse(lines)
    assert v.verdict is Verdict.FAILED and v.ranks[0].failure == "network (unnamed) not found"


def test_no_nccl_lines_is_none():
    lines = ["Starting training", "epoch 0 loss 1.0", "done"]
    v = analyse(lines)
    assert v.transport is Transport.NONE and v.verdict is Verdict.NONE and v.ranks == ()
    assert v.exit_code == 0
    assert v.summary.startswith("fabrikit: no NCCL network selection seen in <log>")
    v = analyse(lines, expected_fabric="slingshot")
    assert v.exit_code == 1 and v.warning_codes == ("no-transport",)
    assert v.summary.startswith("fabrikit: WARNING no NCCL network selection seen")
    assert analyse(lines, expected_fabric="ethernet").exit_code == 0


def test_nccl_lines_without_net_init_is_none_per_rank():
    lines = [L.info("n1", 5, 0, "cudaDriverVersion 12060"),
             L.info("n1", 5, 0, "Bootstrap : Using ib0:10.0.0.1<0>")]
    v = analyse(lines, expected_fabric="infiniband")
    assert len(v.ranks) == 1 and v.ranks[0].transport is Transport.NONE
    assert v.verdict is Verdict.NONE and v.exit_code == 1


def test_bad_fabric_is_user_error():
    with pytest.raises(UserError):
        analyse([], expected_fabric="omnipath")


# --------------------------------------------------------------------------------------------
# Mixed transports


def test_mixed_transports_across_ranks():
    ofi = L.job(L.ofi_cxi_rank)
    sock = L.job(L.socket_rank)
    streams = ofi[:4] + sock[4:]
    v = run(streams, fabric="slingshot")
    assert v.verdict is Verdict.FALLBACK and v.exit_code == 1
    assert "mixed-transports" in v.warning_codes and "socket-fallback" in v.warning_codes
    assert v.transport is Transport.SOCKET  # the worst one
    assert v.transport_counts() == {"ofi": 4, "socket": 4}
    assert v.summary == ("fabrikit: WARNING mixed transports: OFI/cxi on 4/8, Socket on 4/8 "
                         "ranks: fallback on 4 ranks on a slingshot fabric")
    assert [r.transport for r in v.ranks] == [Transport.OFI] * 4 + [Transport.SOCKET] * 4


def test_mixed_ofi_providers():
    streams = L.job(L.ofi_cxi_rank)[:4] + L.job(L.ofi_cxi_rank, provider="tcp")[4:]
    v = run(streams, fabric="slingshot")
    assert "mixed-transports" in v.warning_codes and "ofi-slow-provider" in v.warning_codes
    assert v.verdict is Verdict.FALLBACK


def test_mixed_nccl_versions():
    a = L.job(L.ofi_cxi_rank, nccl="2.23.4", version_line=True)
    b = L.job(L.ofi_cxi_rank, nccl="2.21.5", version_line=True)
    v = run(a[:4] + b[4:], fabric="slingshot")
    assert "mixed-nccl-versions" in v.warning_codes
    assert v.nccl_version == "2.23.4"  # tie: the newest


# --------------------------------------------------------------------------------------------
# GH200 LL128 hazard


@pytest.mark.parametrize("nccl", ["2.27.3", "2.28.9"])
def test_ll128_hazard_without_guard(nccl):
    v = run(L.job(L.ofi_cxi_rank, nccl=nccl, current_plugin_format=True), fabric="slingshot")
    assert "ll128-hazard" in v.warning_codes
    assert v.verdict is Verdict.FAST and v.exit_code == 0  # transport is fine; the line is loud
    assert v.summary.startswith("fabrikit: WARNING transport OFI/cxi on 8/8 ranks")
    assert "NCCL_PROTO=^LL128" in v.summary and v.ll128_guard is None


@pytest.mark.parametrize("value", ["^LL128", "^LL,LL128", "^ll128", "Simple", "LL,Simple"])
def test_ll128_guard_from_log_echo(value):
    v = run(L.job(L.ofi_cxi_rank, nccl="2.27.3", env={"NCCL_PROTO": value}), fabric="slingshot")
    assert "ll128-hazard" not in v.warning_codes
    assert v.ll128_guard == f"NCCL_PROTO={value} (log)"
    assert v.summary.startswith("fabrikit: transport OFI/cxi")


def test_ll128_guard_echo_needs_to_exclude_ll128():
    v = run(L.job(L.ofi_cxi_rank, nccl="2.27.3", env={"NCCL_PROTO": "^LL"}), fabric="slingshot")
    assert "ll128-hazard" in v.warning_codes


def test_ll128_guard_from_caller_env():
    streams = L.job(L.ofi_cxi_rank, nccl="2.27.3")
    assert "ll128-hazard" not in run(streams, fabric="slingshot",
                                     env={"NCCL_PROTO": "^LL128"}).warning_codes
    rdzv = {"FI_CXI_RDZV_PROTO": "alt_read", "FI_CXI_RDZV_EAGER_SIZE": "0",
            "FI_CXI_RDZV_THRESHOLD": "0", "FI_CXI_RDZV_GET_MIN": "0"}
    v = run(streams, fabric="slingshot", env=rdzv)
    assert "ll128-hazard" not in v.warning_codes and v.ll128_guard.startswith("FI_CXI_RDZV")
    partial = dict(rdzv, FI_CXI_RDZV_GET_MIN="")
    assert "ll128-hazard" in run(streams, fabric="slingshot", env=partial).warning_codes


def test_no_ll128_hazard_before_227_or_off_cxi():
    assert "ll128-hazard" not in run(L.job(L.ofi_cxi_rank, nccl="2.26.6"),
                                     fabric="slingshot").warning_codes
    assert "ll128-hazard" not in run(L.job(L.ofi_efa_rank, nccl="2.27.3")).warning_codes
    assert "ll128-hazard" not in run(L.job(L.ib_rank, nccl="2.27.3"),
                                     fabric="infiniband").warning_codes


def test_proto_excludes_ll128():
    assert proto_excludes_ll128("^LL128") and proto_excludes_ll128("'^LL128'")
    assert proto_excludes_ll128("^LL128.")  # some NCCL echo lines end with a full stop
    assert not proto_excludes_ll128("LL128") and not proto_excludes_ll128("^LL")
    assert not proto_excludes_ll128(None) and not proto_excludes_ll128("")


# --------------------------------------------------------------------------------------------
# Prefixes, noise, interleaving


@pytest.mark.parametrize("style", L.OUTER_STYLES)
def test_launcher_prefixes_give_the_same_answer(style):
    streams = L.job(L.ofi_cxi_rank)
    base = run(streams, fabric="slingshot")
    pre = [L.outer_prefix(s, style, rank=r) for r, s in enumerate(streams)]
    v = run(pre, seed=3, fabric="slingshot")
    assert per_rank(v) == per_rank(base)
    assert v.summary == base.summary and v.warnings == base.warnings


def test_rank_prefix_hint_without_comm_lines():
    streams = L.job(L.ofi_cxi_rank, comm=False)
    pre = [L.outer_prefix(s, "rank", rank=r) for r, s in enumerate(streams)]
    v = run(pre, fabric="slingshot")
    assert [r.rank for r in v.ranks] == list(range(8))
    assert all(r.nranks is None for r in v.ranks)


def test_processes_without_rank_info_are_kept_by_host_and_pid():
    v = run(L.job(L.ofi_cxi_rank, comm=False), fabric="slingshot")
    assert all(r.rank is None for r in v.ranks)
    assert len({(r.host, r.pid) for r in v.ranks}) == 8
    assert v.summary.startswith("fabrikit: transport OFI/cxi on 8/8 ranks")


def test_world_communicator_wins_over_subcommunicators():
    streams = L.job(L.ofi_cxi_rank)
    for r, s in enumerate(streams):  # a later 2-rank sub-communicator with other rank numbers
        host, pid = L.rank_host(r), 40000 + 17 * r
        s.append(L.info(host, pid, r % 4, f"comm 0x7f00{r:02x} rank {r % 2} nranks 2 cudaDev "
                                          f"{r % 4} busId 1000 - Init COMPLETE"))
    v = run(streams)
    assert [r.rank for r in v.ranks] == list(range(8)) and {r.nranks for r in v.ranks} == {8}


@pytest.mark.parametrize("seed", range(8))
def test_interleavings_give_identical_verdicts(seed):
    streams = L.job(L.ofi_cxi_rank)[:4] + L.job(L.socket_rank)[4:]
    ref = run(streams, seed=1000, fabric="slingshot").to_dict()
    assert run(streams, seed=seed, fabric="slingshot").to_dict() == ref


def test_bare_nccl_lines_without_host_prefix():
    # fabric-facts.md writes the lines as "NCCL INFO ..."; a rank's own file may look so.
    lines = ["NCCL version 2.23.4+cuda12.6",
             "NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v6)",
             "NCCL INFO NET/OFI Using aws-ofi-nccl 1.6.0",
             "NCCL INFO NET/OFI Selected Provider is cxi (found 8 nics)",
             "NCCL INFO Using network AWS Libfabric",
             "NCCL INFO Channel 00/0 : 0[0] -> 4[0] [receive] via NET/AWS Libfabric/7/GDRDMA"]
    v = analyse(lines, expected_fabric="slingshot")
    assert v.transport is Transport.OFI and v.provider == "cxi" and len(v.ranks) == 1
    assert v.ranks[0].pid is None and v.ranks[0].gdrdma
    assert v.summary == "fabrikit: transport OFI/cxi on 1/1 ranks (NCCL 2.23.4, aws-ofi-nccl 1.6.0)"


def test_bare_lines_grouped_by_rank_prefix():
    lines = []
    for r, kind in enumerate(["AWS Libfabric", "Socket"]):
        lines.append(f"[rank{r}]:NCCL INFO Using network {kind}")
    v = analyse(lines, expected_fabric="slingshot")
    assert [(r.rank, r.transport) for r in v.ranks] == [(0, Transport.OFI), (1, Transport.SOCKET)]
    assert "mixed-transports" in v.warning_codes


def test_crlf_ansi_and_invalid_utf8(tmp_path):
    streams = L.job(L.ofi_cxi_rank)
    lines = L.interleave(streams, 5)
    body = L.to_bytes(lines, crlf=True, colour=True, bad_bytes=True)
    v = analyse(body.splitlines(keepends=True), expected_fabric="slingshot")
    ref = analyse(lines, expected_fabric="slingshot")
    assert per_rank(v) == per_rank(ref) and v.summary == ref.summary


def test_bytes_and_str_lines_agree():
    lines = L.interleave(L.job(L.ib_rank), 2)
    a = analyse(lines)
    b = analyse([x.encode() + b"\n" for x in lines])
    assert a.to_dict()["ranks"] == b.to_dict()["ranks"]


# --------------------------------------------------------------------------------------------
# Truncation and garbage


def test_provider_line_without_nic_count():
    h = "nid001000:1:1 [0] NCCL INFO "
    v = analyse([h + "NET/OFI Selected Provider is cxi", h + "Using network AWS Libfabric"])
    assert v.ranks[0].provider == "cxi" and v.ranks[0].nics is None


def test_truncated_values_are_not_taken():
    h = "nid001000:1:1 [0] NCCL INFO "
    v = analyse([h + "Using network Soc", h + "NET/OFI Selected Provider is cx",
                 h + "NET/IB : Using [0]mlx5_0:1/I", h + "NCCL version 2.2"])
    r = v.ranks[0]
    assert r.transport is Transport.NONE and r.provider is None and r.ib_devices == ()
    assert r.nccl_version is None and "unknown-network" not in v.warning_codes


def test_last_line_cut_at_every_position_never_crashes():
    lines = L.interleave(L.job(L.ofi_cxi_rank, nodes=1, gpn=2), 0)
    last = L.info("nid001000", 40000, 0,
                  "NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)")
    for i in range(len(last) + 1):
        v = analyse([*lines, last[:i]], expected_fabric="slingshot")
        assert v.verdict in Verdict


def test_merged_lines_from_two_writers():
    streams = L.job(L.ofi_cxi_rank)
    ref = run(streams, seed=9, fabric="slingshot")
    for seed in range(5):
        lines = L.cut_merge(L.interleave(streams, seed), seed, rate=0.05)
        v = analyse(lines, expected_fabric="slingshot")
        # Some facts may be lost with the cut lines, but never a wrong transport.
        assert {r.transport for r in v.ranks} <= {Transport.OFI, Transport.NONE}
        assert v.verdict is Verdict.FAST
        assert len(v.ranks) == len(ref.ranks)


def test_merged_line_drops_the_cut_part():
    a = L.info("n1", 11, 0, "Using network Socket")
    b = L.info("n2", 22, 1, "Using network AWS Libfabric")
    c = L.info("n2", 22, 1, "Bootstrap : Using eth0:10.0.0.2<0>")  # the real n2 has more lines
    v = analyse([c, c, a[: len(a) - 3] + b])  # "...Using network Socn2:22:22 [1] NCCL INFO ..."
    assert [(r.host, r.transport) for r in v.ranks] == [("n2", Transport.OFI)]
    v = analyse([c, a[: len(a) - 8] + " " + b])  # cut at a space: nothing to fold
    assert [(r.host, r.transport) for r in v.ranks] == [("n2", Transport.OFI)]
    tail = L.info("n1", 11, 0, "Using network Socket")[1:]  # "1:11:11 [0] ..." head lost
    v = analyse([a[:5], tail, *[L.info("n1", 11, 0, "Bootstrap : Using eth0:10.0.0.1<0>")] * 2])
    assert [(r.host, r.transport) for r in v.ranks] == [("n1", Transport.SOCKET)]


@pytest.mark.parametrize("rank_fn,rates", [
    (L.ofi_cxi_rank, (0.05, 0.15)), (L.ofi_efa_rank, (0.05, 0.15)), (L.ib_rank, (0.05, 0.15)),
    (L.legacy_rank, (0.05, 0.15)), (L.rccl_rank, (0.05, 0.15)), (L.socket_rank, (0.05,)),
])
def test_spliced_lines_make_no_phantom_process(rank_fn, rates):
    """Two writers cutting each other's lines (5 % and 15 % of lines) leave head and tail
    fragments: none may become a process of its own, nor a node."""
    streams = L.job(rank_fn)
    ref = analyse(L.interleave(streams, 0))
    assert len(ref.ranks) == 8 and ref.nodes == 2
    for rate in rates:
        for seed in range(20):
            v = analyse(L.cut_merge(L.interleave(streams, seed), seed, rate=rate))
            assert sorted((r.host, r.pid) for r in v.ranks) == sorted(
                (r.host, r.pid) for r in ref.ranks), (rate, seed)
            assert v.nodes == 2, (rate, seed)


def test_splice_fragments_are_folded_into_their_process():
    h = "nid001000"
    own = [L.info(h, 40000, 0, "Bootstrap : Using hsn0:10.100.0.1<0>"),
           L.info(h, 40000, 0, "NET/OFI Selected Provider is cxi (found 4 nics)"),
           L.info(h, 40000, 0, "Using network AWS Libfabric"),
           L.info(h, 40017, 1, "Bootstrap : Using hsn0:10.100.0.1<0>"),
           L.info(h, 40017, 1, "Using network AWS Libfabric")]
    # the tail of `nid001000:40000:40000 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.6.0`
    # whose head went to another line: no launcher's label `0]`, no process
    v = analyse([*own, "0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.6.0"])
    assert [(r.host, r.pid) for r in v.ranks] == [(h, 40000), (h, 40017)]
    # a host cut whole: the line is the one process with that pid
    v = analyse([*own, ":40017:40017 [1] NCCL INFO NET/Plugin: Loaded net plugin AWS "
                 "Libfabric (v6)"])
    assert [(r.host, r.pid) for r in v.ranks] == [(h, 40000), (h, 40017)]
    assert v.ranks[1].plugin == "AWS Libfabric"
    # ... but where two processes on two hosts have that pid, it cannot say whose it is
    other = L.info("nid001001", 40017, 1, "Using network AWS Libfabric")
    v = analyse([*own, other, ":40017:40017 [1] NCCL INFO NET/OFI Selected Provider is cxi"])
    assert ("", 40017) in [(r.host, r.pid) for r in v.ranks]
    # ... and the other way round: most of a process's lines cut whole (a host redacted as
    # `NAME ` with a blank, nccl-tests#217), one with its host: one process, on that host
    cut = [x.replace(h, "NAME ", 1) for x in own[:3]]
    v = analyse([*cut, L.info("NAME", 40000, 0, "misc/socket.cc:428 -> 6")])
    assert [(r.host, r.pid, r.transport.value) for r in v.ranks] == [("NAME", 40000, "ofi")]
    # a spliced head `...IP` + host: the made-up host's address is one its machine has,
    # though not the one its own process printed
    v = analyse([*own, L.info(h, 40000, 0, "NET/Socket : Using [0]hsn1:10.250.0.1<0>"),
                 L.info(h, 40034, 2, "Bootstrap : Using hsn0:10.100.0.1<0>"),
                 L.info(h, 40034, 2, "Using network AWS Libfabric"),
                 L.info("10.100.0.1" + h, 40017, 1, "NET/Socket : Using [0]hsn1:10.250.0.1<0>")])
    assert [(r.host, r.pid) for r in v.ranks] == [(h, 40000), (h, 40017), (h, 40034)]


def test_a_prefix_glued_to_a_cut_line_is_another_process():
    """`[send]nid1:40085:40085 [1] NCCL INFO`: the splice shows a bare `[1] NCCL INFO` after
    a blank, like one process's records joined by blanks, but its host:pid:tid is there."""
    a = L.info("nid001001", 40119, 3, "Channel 01/0 : 7[3] -> 3[3] [send]", tid=40126)
    b = L.info("nid001001", 40085, 1, "comm 0x55d0 rank 5 nRanks 8 nNodes 2 localRanks 4 "
               "localRank 1 MNNVL 0")
    c = L.info("nid001001", 40119, 3, "comm 0x55d1 rank 7 nRanks 8 nNodes 2 localRanks 4 "
               "localRank 3 MNNVL 0")
    v = analyse([c, a + b])
    assert sorted((r.pid, r.rank) for r in v.ranks) == [(40085, 5), (40119, 7)]


def test_random_garbage_never_crashes():
    rng = random.Random(42)
    alphabet = "NCCL INFO WARN NET/OFI/IB/Socket :[]0123456789 via Using network\x1b\r\t\xff"
    base = L.interleave(L.job(L.socket_rank), 1)
    for _ in range(300):
        line = rng.choice(base)
        cut = rng.randrange(len(line) + 1)
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30)))
        analyse([line[:cut] + noise + line[cut:], noise, line[cut:]])
    analyse([b"\x00\xff" * 5000, "x" * 200_000, ""])  # very long / binary lines


def test_iter_stream_lines_bounds_long_lines():
    data = b"a" * 100 + b"\n" + b"b" * 10_000 + b"\nlast"
    out = list(iter_stream_lines(io.BytesIO(data), max_len=64))
    assert out == [b"a" * 64, b"b" * 64, b"last"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_iter_stream_lines_keeps_the_last_piece_of_a_progress_bar_line(eol):
    # a bar redrawn after CRs for 10 kB, then what the job printed after the last redraw:
    # the head (cut) and that piece come out; the redraws between them do not
    bar = b"".join(b"\r 12%%|#   | %d/9000 [00:01<00:09]" % i for i in range(300))
    data = bar + b"\rnode1:7:7 [0] NCCL WARN NET/IB : Got completion" + eol + b"next" + eol
    out = list(iter_stream_lines(io.BytesIO(data), max_len=64))
    assert out == [data[:64], b"node1:7:7 [0] NCCL WARN NET/IB : Got completion\n", b"next" + eol]
    # its last piece is cut like any line; a CR only in the part kept adds nothing
    data = bar + b"\r" + b"z" * 100 + eol
    assert list(iter_stream_lines(io.BytesIO(data), max_len=64)) == [data[:64], b"z" * 64 + b"\n"]
    data = b"x\r" + b"y" * 100 + eol
    assert list(iter_stream_lines(io.BytesIO(data), max_len=64)) == [data[:64]]


def test_iter_stream_lines_keeps_the_last_piece_when_a_read_splits_its_crlf():
    # readline(max_len) ends a read at max_len bytes: where that falls between the CR and
    # the LF of the line's CRLF, the CR must not count as a redraw that empties the piece
    line = b"node1:7:7 [0] NCCL WARN NET/IB : Got completion"
    for shift in range(-2, 3):
        bar = b"".join(b"\r 12%%|#   | %d/9000 [00:01<00:09]" % i for i in range(300))
        pad = (-(len(bar) + 1 + len(line) + 1) % 64) + shift  # CR ends a read at shift 0
        data = b"x" * pad + bar + b"\r" + line + b"\r\nnext\r\n"
        out = list(iter_stream_lines(io.BytesIO(data), max_len=64))
        assert out == [data[:64], line + b"\n", b"next\r\n"], shift
    # a line that ends in a bare CR at the end of the stream leaves nothing after it
    data = b"y" * 100 + b"\r" + line + b"\r"
    assert list(iter_stream_lines(io.BytesIO(data), max_len=64)) == [data[:64]]


def test_streaming_analyser_matches_analyse_and_result_is_repeatable():
    lines = L.interleave(L.job(L.ib_rank), 3)
    a = LogAnalyser(expected_fabric="infiniband")
    for x in lines:
        a.feed(x)
    assert a.result().to_dict() == analyse(lines, expected_fabric="infiniband").to_dict()
    assert a.result() == a.result()


# --------------------------------------------------------------------------------------------
# JSON shape


def test_to_json_shape():
    v = run(L.job(L.ofi_cxi_rank, nccl="2.27.3"), fabric="slingshot")
    d = json.loads(v.to_json())
    for key in ("transport", "provider", "nccl_version", "plugin", "plugin_version", "ranks",
                "warnings", "verdict"):
        assert key in d
    assert d["transport"] == "ofi" and d["provider"] == "cxi" and d["verdict"] == "fast"
    assert d["plugin"] == "AWS Libfabric" and d["plugin_version"] == "1.6.0"
    assert d["warnings"] == [{"code": "ll128-hazard", "message": v.warnings[0].message}]
    assert len(d["ranks"]) == 8 and d["ranks"][0]["rank"] == 0
    assert d["ranks"][0]["transport"] == "ofi" and d["ranks"][0]["provider"] == "cxi"
    assert all(w["code"] in WARNING_CODES for w in d["warnings"])


# --------------------------------------------------------------------------------------------
# CLI


@pytest.fixture()
def logs(tmp_path):
    def make(name, streams, seed=0, **kw):
        return str(L.write_log(tmp_path / name, L.interleave(streams, seed), **kw))
    return make


def test_cli_fast_exit_0_with_table(logs):
    path = logs("ofi.log", L.job(L.ofi_cxi_rank))
    res = CliRunner().invoke(check_log, [path, "--fabric", "slingshot"])
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    assert out[0].split() == ["RANK", "HOST:PID", "TRANSPORT", "PROVIDER/DEVICES", "NCCL", "PLUGIN"]
    assert len(out) == 1 + 8 + 1
    assert out[1].split()[:4] == ["0", "nid001000:40000", "ofi", "cxi"]
    assert out[-1] == "fabrikit: transport OFI/cxi on 8/8 ranks (NCCL 2.23.4, aws-ofi-nccl 1.6.0)"


def test_cli_fallback_exit_1_warnings_then_summary(logs):
    path = logs("sock.log", L.job(L.socket_rank, nccl="2.21.5"), crlf=True)
    res = CliRunner().invoke(check_log, [path, "--fabric", "slingshot"])
    assert res.exit_code == 1
    out = res.output.splitlines()
    assert out[-1] == LOUD
    assert any(x.startswith("warning [socket-fallback]:") for x in out)
    assert any(x.startswith("warning [plugin-missing]:") for x in out)


def test_cli_failed_exit_1(logs):
    res = CliRunner().invoke(check_log, [logs("f.log", L.job(L.failed_rank))])
    assert res.exit_code == 1 and "ERROR NCCL network init failed" in res.output


def test_cli_none_exit_codes(logs, tmp_path):
    p = tmp_path / "plain.log"
    p.write_text("hello\nworld\n")
    assert CliRunner().invoke(check_log, [str(p)]).exit_code == 0
    assert CliRunner().invoke(check_log, [str(p), "--fabric", "ethernet"]).exit_code == 0
    assert CliRunner().invoke(check_log, [str(p), "--fabric", "slingshot"]).exit_code == 1


def test_cli_json(logs):
    path = logs("ib.log", L.job(L.ib_rank))
    res = CliRunner().invoke(check_log, [path, "--json", "--fabric", "infiniband"])
    assert res.exit_code == 0
    d = json.loads(res.output)
    assert d["transport"] == "ib" and d["verdict"] == "fast" and d["exit_code"] == 0
    assert d["ranks"][0]["ib_devices"] == ["mlx5_0:1", "mlx5_1:1"]
    assert d["sources"] == [path]


def test_cli_per_rank_files_equal_combined_log(tmp_path):
    streams = L.job(L.ofi_cxi_rank)[:4] + L.job(L.socket_rank)[4:]
    paths = [str(L.write_log(tmp_path / f"rank{r}.log", s)) for r, s in enumerate(streams)]
    combined = str(L.write_log(tmp_path / "all.log", L.interleave(streams, 7)))
    a = check_files(paths, "slingshot")
    b = check_files([combined], "slingshot")
    assert per_rank(a) == per_rank(b) and a.warning_codes == b.warning_codes
    assert a.ranks[0].sources == (paths[0],)
    assert a.source == f"{paths[0]} (+7 more)"


def test_cli_stdin(logs):
    body = L.to_bytes(L.interleave(L.job(L.ofi_cxi_rank), 0))
    res = CliRunner().invoke(check_log, ["-", "--fabric", "slingshot", "--json"], input=body)
    assert res.exit_code == 0 and json.loads(res.output)["source"] == "<stdin>"


def test_cli_env_guard(logs):
    path = logs("h.log", L.job(L.ofi_cxi_rank, nccl="2.27.3"))
    res = CliRunner().invoke(check_log, [path, "--json"])
    assert "ll128-hazard" in [w["code"] for w in json.loads(res.output)["warnings"]]
    res = CliRunner().invoke(check_log, [path, "--json", "--env", "NCCL_PROTO=^LL128"])
    assert json.loads(res.output)["warnings"] == []
    res = CliRunner().invoke(check_log, [path, "--json", "--inherit-env"],
                             env={"NCCL_PROTO": "^LL128"})
    assert json.loads(res.output)["ll128_guard"].startswith("NCCL_PROTO=^LL128")


@pytest.mark.parametrize("case", ["missing", "directory", "empty", "blank", "bad-env",
                                  "stdin-twice", "empty-stdin"])
def test_cli_bad_input_exit_2(tmp_path, case):
    good = str(L.write_log(tmp_path / "good.log", L.job(L.ofi_cxi_rank)[0]))
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.log"
    blank.write_bytes(b"\n \r\n")
    args, stdin, name = {
        "missing": ([str(tmp_path / "nope.log")], None, "nope.log"),
        "directory": ([str(tmp_path)], None, str(tmp_path)),
        "empty": ([good, str(empty)], None, "empty.log"),
        "blank": ([str(blank)], None, "blank.log"),
        "bad-env": ([good, "--env", "NCCL_PROTO"], None, "KEY=VALUE"),
        "stdin-twice": (["-", "-"], b"x\n", "stdin"),
        "empty-stdin": (["-"], b"", "<stdin>"),
    }[case]
    res = CliRunner().invoke(check_log, args, input=stdin)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    err = res.stderr if hasattr(res, "stderr") else res.output
    lines = [x for x in err.splitlines() if x]
    assert len(lines) == 1 and name in lines[0] and "Traceback" not in err


def test_cli_unreadable_file(tmp_path, monkeypatch):
    p = tmp_path / "secret.log"
    p.write_text("x\n")
    real_open = open

    def fake_open(path, *a, **kw):
        if str(path) == str(p):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", fake_open)
    res = CliRunner().invoke(check_log, [str(p)])
    assert res.exit_code == 2 and "permission denied" in res.output and str(p) in res.output


def test_cli_no_files_is_usage_error():
    assert CliRunner().invoke(check_log, []).exit_code == 2


def test_check_files_raises_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        check_files([str(tmp_path / "x")])


def test_table_is_capped():
    v = run(L.job(L.ofi_cxi_rank, nodes=20))
    text = format_table(v, max_rows=10)
    assert len(text.splitlines()) == 1 + 10 + 1 and "70 more ranks" in text


def test_real_entry_point_subprocess(tmp_path):
    streams = L.job(L.socket_rank)
    path = L.write_log(tmp_path / "job.log", L.interleave(streams, 1), colour=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "runner.check_log_cmd", str(path), "--fabric",
                           "slingshot"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[-1] == LOUD
    proc = subprocess.run([sys.executable, "-m", "runner.check_log_cmd", "--json", "-"],
                          cwd=REPO, env=env, input=path.read_text(), capture_output=True,
                          text=True, timeout=60)
    assert json.loads(proc.stdout)["transport"] == "socket"
    proc = subprocess.run([sys.executable, "-m", "runner.check_log_cmd", str(tmp_path / "no")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "no such file" in proc.stderr


def test_no_torch_and_light_imports():
    code = ("import sys, runner.check_log_cmd, runner.nccl_log; "
            "bad = [m for m in ('torch', 'numpy', 'yaml') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
