#!/bin/bash -l
# Multi-node PyTorch on a GH200 Slingshot machine, written for fabrikit's import tests in
# the style of the Sigma2 Olivia guide (not a copy): container from the support area, host
# libfabric bound in, torchrun with c10d rendezvous on a fixed port.
#SBATCH --account=<project_number>
#SBATCH --job-name=ddp-multinode
#SBATCH --output=ddp_%j.out
#SBATCH --partition=accel
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=72
#SBATCH --mem=440G
#SBATCH --time=02:00:00

set -euo pipefail

CONTAINER=/cluster/work/support/container/pytorch_nvidia_25.06_arm64.sif
LIBFABRIC=/opt/cray/libfabric/1.22.0
WORKDIR=/cluster/work/projects/nn9999k/ddp

# Head node and its address for the rendezvous
nodes=( $(scontrol show hostnames "$SLURM_JOB_NODELIST") )
head_node=${nodes[0]}
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)
echo "head node: $head_node ($head_node_ip)"

srun apptainer exec --nv \
    --bind ${LIBFABRIC}/lib64:/opt/libfabric/lib \
    --bind ${LIBFABRIC}/include:/opt/libfabric/include \
    --bind /cluster/work/support/nccl:/opt/nccl \
    --bind /usr/lib64:/usr/lib64 \
    --bind /opt/nvidia/hpc_sdk/Linux_aarch64/24.11/compilers/lib:/opt/nvidia/hpc_sdk/lib \
    --bind "$WORKDIR":/workspace \
    --env LD_LIBRARY_PATH=/opt/libfabric/lib:/opt/nccl/lib:/usr/lib64:/opt/nvidia/hpc_sdk/lib \
    --env FI_PROVIDER=cxi \
    --env NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3 \
    --env FI_CXI_RX_MATCH_MODE=hybrid \
    "$CONTAINER" \
    torchrun --nnodes="$SLURM_JOB_NUM_NODES" \
             --nproc_per_node=4 \
             --rdzv_id="$SLURM_JOB_ID" \
             --rdzv_backend=c10d \
             --rdzv_endpoint="$head_node_ip:29500" \
             /workspace/train.py --epochs 10 --batch-size 256
