/* slurm/mpi-probe.c — hpt-mpi-probe: one line per MPI rank, "rank R size S
 * node NODE", where NODE is the Slurm node the rank runs on (SLURMD_NODENAME
 * under srun, else the host name). The launcher (slurm/launch.sh) runs it as a
 * first job step to check that MPI sees the whole allocation (a PMI mismatch
 * makes every task a singleton of size 1) and where each rank landed.
 * Exit status 0; MPI errors abort through MPI's default handler. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = "unknown";
    const char *node = getenv("SLURMD_NODENAME");
    if (!node || !*node) {
        gethostname(host, sizeof host - 1);
        node = host;
    }
    printf("rank %d size %d node %s\n", rank, size, node);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
