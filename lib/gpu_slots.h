/* gpu_slots.h — which ranks share a GPU, from every rank's (host, GPU)
 * pair: the host-side half of the NCCL set-up check (lib/comm_nccl.c
 * gathers the pairs over MPI; NCCL refuses two ranks on one GPU with an
 * unhelpful "invalid usage" deep inside ncclCommInitRank). Pure functions,
 * no MPI, no CUDA. */
#ifndef HPT_GPU_SLOTS_H
#define HPT_GPU_SLOTS_H

#include <stddef.h>

/* One rank's GPU: the node's host name and the device's PCI bus id
 * ("0000:3b:00.0", unique inside a host; cudaDeviceGetPCIBusId) or UUID.
 * gpu[0] == 0: the rank has no GPU (never counted as shared). Both fields
 * NUL-terminated within their size. */
typedef struct {
    char host[64];
    char gpu[64];
} hpt_gpu_slot;

/* For ranks 0..n-1 (slots[i] is rank i's): first[i] = the lowest rank
 * j < i with the same host and the same non-empty gpu, or -1 when rank i's
 * GPU is its own (or it has none). Returns how many ranks have
 * first[i] >= 0 (0: every GPU is distinct), or -1 when out of memory
 * (first[] then all -1). O(n log n); first has n entries, caller-owned. */
int hpt_gpu_shared(const hpt_gpu_slot *slots, int n, int *first);

/* One line for a person, from hpt_gpu_shared's first[]: "rank 1 on nodeA
 * shares GPU 0000:3b:00.0 with rank 0; rank 3 on nodeA shares ..." for the
 * first `max_listed` sharing ranks, then " (and K more ranks)"; "" when
 * none share. Always NUL-terminated (truncated to cap - 1 bytes). Returns
 * buf. */
char *hpt_gpu_shared_describe(const hpt_gpu_slot *slots, int n, const int *first, int max_listed,
                              char *buf, size_t cap);

#endif
