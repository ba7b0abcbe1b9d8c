#!/bin/bash
# A job in the older singularity style, written for fabrikit's import tests: one task per
# GPU started by srun (no torchrun), a comma-joined -B list with the whole /usr/lib64,
# SINGULARITYENV_ variables and an option after the first command.
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=16
#SBATCH --mem=0
#SBATCH --partition=gpu
#SBATCH --qos=normal

set -e
#SBATCH --time=04:00:00

IMG=$HOME/images/torch.sif
export SINGULARITYENV_NCCL_SOCKET_IFNAME=hsn
export SINGULARITYENV_FI_CXI_DISABLE_HOST_REGISTER=1
export SINGULARITYENV_FI_MR_CACHE_MONITOR=memhooks
export MASTER_PORT=29500
export MASTER_ADDR=$(hostname)

srun --export=ALL,NCCL_NET_GDR_LEVEL=PHB singularity exec --nv \
  -B /opt/cray/libfabric/1.20.1/lib64:/opt/libfabric,/usr/lib64,/var/spool/slurmd \
  $IMG python3 -u ddp_env.py --epochs=5
