"""`fabrikit sites import`, the fabric: which network the script talks to (votes from
`FI_*`/`hsn`/`cxi` for Slingshot, `NCCL_IB_*`/`mlx5`/`ib0` for InfiniBand, forced sockets for
Ethernet) and which GPU vendor and architecture it runs on; the preset the profile extends;
and the fabric's hazard rules: a missing NCCL_DEBUG or NCCL_NET (silent TCP fallback), the
GH200 LL128 guard, FI_CXI_RX_MATCH_MODE=hybrid without `disable_rdzv_get`, NCCL_IB_DISABLE on
InfiniBand. Facts behind each rule are in shared/reference/fabric-facts.md.
"""

from __future__ import annotations

import re

from . import fabrics
from .site_import_slurm import srun_extra
from .site_import_state import ImportState


def gather_evidence(st: ImportState) -> None:
    ev = st.evidence
    checks = [
        ("slingshot", r"\bFI_PROVIDER\s*=\s*['\"]?cxi|\bFI_CXI_\w+|/opt/cray/libfabric|libcxi|/run/cxi|"
                      r"SLINGSHOT_|\bhsn\d?\b|NCCL_NET\s*=\s*['\"]?(AWS Libfabric|OFI)|aws-ofi|"
                      r"singularity-(AI-)?bindings|disable_rdzv_get|\bcxi\b"),
        ("infiniband", r"\bNCCL_IB_(HCA|GID_INDEX|TIMEOUT|SL|TC|QPS_PER_CONNECTION|ADAPTIVE_ROUTING)\b|\bmlx5|"
                       r"\bib0\b|/dev/infiniband|libibverbs|UCX_NET_DEVICES|\bInfiniBand\b|\bHDR\b|\bNDR\b"),
        ("ethernet", r"NCCL_IB_DISABLE\s*=\s*['\"]?1|NCCL_SOCKET_IFNAME\s*=\s*['\"]?=?(eth|en)"),
    ]
    for number, line in enumerate(st.js.text.splitlines(), 1):
        for fabric, pattern in checks:
            match = re.search(pattern, line)
            if match and len(ev.votes[fabric]) < 3:
                ev.votes[fabric].append(f"line {number}: {match.group(0).strip()}")
        low = line.lower()
        if re.search(r"\bgh200\b|grace.hopper", low):
            ev.gh200 = ev.gh200 or f"line {number}: GH200"
            ev.arch = ev.arch or ("aarch64", f"line {number}: GH200")
        if re.search(r"aarch64|arm64", low):
            ev.arch = ev.arch or ("aarch64", f"line {number}: {'aarch64' if 'aarch64' in low else 'arm64'}")
        if re.search(r"\brocm\b|\bmi2\d\d|\bmi300|\brccl\b|HIP_VISIBLE|ROCR_VISIBLE|MIOPEN_", line, re.I):
            ev.vendor = ev.vendor or ("amd", f"line {number}: ROCm/RCCL")


def choose_preset(st: ImportState) -> str:
    d = st.draft
    fabric = st.evidence.fabric_guess()
    ev = st.evidence
    if fabric is None:
        d.set(("extends",), "ethernet", "TODO: the script names no fabric (no hsn/cxi/FI_*, no ib0/mlx5/"
              "NCCL_IB_*): check `fabrikit sites init` on a compute node")
        d.set(("env", "NCCL_SOCKET_IFNAME"), None, "the ethernet preset's eth0 is a guess here: NCCL picks")
        d.set(("env", "GLOO_SOCKET_IFNAME"), None, "the ethernet preset's eth0 is a guess here")
        fabric_text = "fabric unknown"
        st.hazard("fabric-unknown", "todo", None, "the script names no fabric; the profile extends the "
                  "ethernet preset: run `fabrikit sites init` on a compute node to find it")
    else:
        d.set(("extends",), fabric, "; ".join(ev.votes[fabric]))
        fabric_text = fabrics.get(fabric).title
    arch = ev.arch[0] if ev.arch else "x86_64"
    if st.step and st.step.container is not None:
        d.set(("container", "arch"), arch, ev.arch[1] if ev.arch else "no aarch64/arm64/GH200 in the script")
    gpus = f"{st.gpus}x GPU per node" if st.gpus else "no GPUs requested"
    d.set(("description",), f"{st.name}: imported from {st.js.path.name} ({gpus}, {fabric_text})")
    return fabric or "ethernet"


def fabric_hazards(st: ImportState, preset: str) -> None:
    d = st.draft
    env = d.root.get("env", {})
    if "NCCL_DEBUG" not in {n.removeprefix("APPTAINERENV_").removeprefix("SINGULARITYENV_") for n in st.env}:
        st.hazard("no-nccl-debug", "fixed", None,
                  "NCCL_DEBUG is not set, so nothing shows which transport NCCL used; fabrikit sets "
                  "NCCL_DEBUG=INFO (INIT,NET) and checks at the end of the job that NCCL used the fabric")
    values = {k: v.value for k, v in env.items() if not k.startswith("#") and hasattr(v, "value")}
    if preset == "slingshot":
        if "NCCL_NET" not in values:
            st.hazard("no-nccl-net", "fixed", None,
                      "NCCL_NET is not set, so NCCL silently falls back to TCP sockets (5-40x slower) when "
                      "the OFI plugin fails; the slingshot preset sets NCCL_NET='AWS Libfabric' (fail "
                      "instead)")
        if "NCCL_NET_PLUGIN" in values and values.get("NCCL_NET", "AWS Libfabric"):
            st.hazard("nccl-net-plugin", "todo", st.env_line("NCCL_NET_PLUGIN"),
                      "NCCL_NET_PLUGIN together with NCCL_NET gives `network ... not found` with some "
                      "plugin builds (fabric-facts.md failure 3): keep one of them")
        if values.get("FI_CXI_RX_MATCH_MODE") == "hybrid":
            extras = d.get(("scheduler", "srun_extra")) or []
            if not any("disable_rdzv_get" in e for e in extras):
                srun_extra(st, "--network=disable_rdzv_get", "FI_CXI_RX_MATCH_MODE=hybrid needs it (HPE)")
                st.hazard("hybrid-rdzv-get", "fixed", st.env_line("FI_CXI_RX_MATCH_MODE"),
                          "FI_CXI_RX_MATCH_MODE=hybrid requires srun --network=disable_rdzv_get (HPE "
                          "shs-ccl-docs); added to srun_extra")
        vendor = st.evidence.vendor[0] if st.evidence.vendor else None
        arch = st.evidence.arch[0] if st.evidence.arch else None
        guarded = "LL128" in str(values.get("NCCL_PROTO", "")) or all(
            str(values.get(k, "")) == "0" for k in ("FI_CXI_RDZV_EAGER_SIZE", "FI_CXI_RDZV_THRESHOLD",
                                                     "FI_CXI_RDZV_GET_MIN"))
        if (st.evidence.gh200 or (arch == "aarch64" and vendor != "amd")) and not guarded:
            why = st.evidence.gh200 or (st.evidence.arch[1] if st.evidence.arch else "")
            d.set(("env", "NCCL_PROTO"), "^LL128", f"GH200 guard added by the import ({why})", quote=True)
            st.hazard("gh200-ll128", "fixed", None,
                      f"GH200 on Slingshot ({why}) without NCCL_PROTO=^LL128 or the FI_CXI_RDZV_*=0 set: "
                      "NCCL >= 2.27 returns wrong all-reduce results at 2-64 MB (NVIDIA/nccl#2001); added "
                      "NCCL_PROTO=^LL128")
    elif preset == "infiniband":
        if "NCCL_NET" not in values:
            st.hazard("no-nccl-net", "fixed", None,
                      "NCCL_NET is not set, so a missing rdma-core makes NCCL fall back to TCP sockets "
                      "(~40x slower) silently; fabrikit's end-of-job check reports the transport each "
                      "rank used")
        if str(values.get("NCCL_IB_DISABLE", "")) == "1":
            st.hazard("ib-disabled", "todo", st.env_line("NCCL_IB_DISABLE"),
                      "NCCL_IB_DISABLE=1 on an InfiniBand cluster sends all traffic over TCP (IPoIB); "
                      "remove it unless that is intended")
