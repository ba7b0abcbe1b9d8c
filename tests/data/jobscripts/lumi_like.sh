#!/usr/bin/env -S bash -e
## A LUMI-style job written for fabrikit's import tests (not a copy of a guide): AMD GPUs,
## RCCL over Slingshot, the singularity-bindings module, everything inside `bash -c`.
#SBATCH --job-name=ddp-rocm
#SBATCH --account=project_462000000
#SBATCH --partition=standard-g
#SBATCH --nodes=4
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=56
#SBATCH --mem=480G
#SBATCH --time=1-00:00:00
#SBATCH --exclusive

module use /appl/local/containers/ai-modules
module load singularity-AI-bindings

SIF=/appl/local/containers/sif-images/lumi-pytorch-rocm-6.2.4-python-3.12-pytorch-v2.7.1.sif

export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
# port derived from the job id so that jobs sharing a node do not collide
export MASTER_PORT="1${SLURM_JOB_ID:0-4}"
export SINGULARITY_BIND="/pfs,/scratch,/projappl,/flash,/var/spool/slurmd,/run/cxi,$SINGULARITY_BIND"
export SINGULARITYENV_LD_LIBRARY_PATH=/lib64:/opt/cray/libfabric/1.15.2.0/lib64:/opt/rocm/lib
export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3
export NCCL_NET_GDR_LEVEL=PHB
export MIOPEN_USER_DB_PATH="/tmp/$(whoami)-miopen-cache-$SLURM_NODEID"
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

c=fe
MASKS="0x${c}000000000000,0x${c}00000000000000,0x${c}0000,0x${c}000000"

srun --cpu-bind=mask_cpu:$MASKS singularity exec $SIF \
    bash -c "\$WITH_CONDA; export NCCL_DEBUG=WARN; \
      python -m torch.distributed.run --nnodes=\$SLURM_NNODES --nproc_per_node=8 \
      --rdzv_id=\$SLURM_JOB_ID --rdzv_backend=c10d --rdzv_endpoint=\$MASTER_ADDR:\$MASTER_PORT \
      train_rocm.py --data /scratch/data"
