#!/bin/bash
# A pyxis/enroot job written for fabrikit's import tests: the container comes from srun's
# --container-image, mounts from --container-mounts, and an arm64 image on a Slingshot
# machine with the HPE rendezvous settings but no LL128 guard.
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --time=00:20:00
#SBATCH --account=a-proj42

export FI_CXI_DISABLE_HOST_REGISTER=1
export NCCL_NET="AWS Libfabric"
export NCCL_DEBUG=INFO
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)

srun --container-image=/capstor/images/ngc-pytorch-25.06-arm64.sqsh \
     --container-mounts=/capstor/scratch/me:/scratch,/users/me/code:/code:ro \
     torchrun --nnodes=$SLURM_NNODES --nproc-per-node=4 --rdzv-backend=c10d \
       --rdzv-endpoint=$head:29500 /code/train.py
