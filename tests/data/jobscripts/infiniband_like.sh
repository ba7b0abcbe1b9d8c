#!/bin/bash
# An A100 InfiniBand cluster job in the style of the MPCDF/Purdue guides, written for
# fabrikit's import tests: typed GRES, a wrapper script written by a heredoc and run
# inside the container, and a cleaned environment.
#SBATCH -J ib-ddp
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH --constraint="gpu"
#SBATCH --gres=gpu:a100:4
#SBATCH --cpus-per-task=72
#SBATCH --mem=500000
#SBATCH -t 00:30:00
#SBATCH -o ./out.%j

module purge
module load apptainer/1.3.6

export NCCL_IB_HCA=mlx5
export NCCL_SOCKET_IFNAME=ib0
export APPTAINERENV_NCCL_DEBUG=WARN
export APPTAINERENV_OMP_NUM_THREADS=18
export APPTAINER_BIND=/ptmp/proj/data:/data:ro

MASTER=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
PORT=29400

cat > run_inner.sh <<EOT
#!/bin/bash
export NCCL_NET_GDR_LEVEL=5
torchrun --nnodes=$SLURM_NNODES --nproc-per-node=\$SLURM_GPUS_PER_NODE \
   --rdzv-backend=c10d --rdzv-endpoint=$MASTER:$PORT --max-restarts=1 \
   /u/someone/train.py --amp
EOT
chmod +x run_inner.sh

srun --cpu-bind=none apptainer exec --nv --cleanenv \
   -B /u/someone:/u/someone \
   /ptmp/someone/images/pytorch-25.06.sif bash ./run_inner.sh
